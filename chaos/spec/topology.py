"""Typed, immutable cluster specifications, validated before any container starts.

A :class:`ClusterSpec` describes what to boot; a backend (today: Docker) realises it. Every
validation error names the field, what was expected, what was seen and how to fix it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import chaos.spec.validation as validation
from chaos.errors import SpecError
from chaos.resources import fixtures_path
from chaos.spec.autoscaling import Autoscaling
from chaos.spec.knobs import PRESETS

DEFAULT_RAY_VERSION = "2.60.0"
#: Debian bookworm's python3; the offline image recipe installs cp311 wheels into it.
DEFAULT_PYTHON = "3.11"
#: Ray refuses an object store below 75 MiB (``OBJECT_STORE_MINIMUM_MEMORY_BYTES``).
MIN_OBJECT_STORE = 75 * 1024**2
#: Head-room in ``/dev/shm`` above the object store (plasma's own bookkeeping, fallback files).
SHM_MARGIN = 64 * 1024**2

GcsFt = Literal["none", "redis", "rocksdb"]
GCS_FT_CHOICES: tuple[str, ...] = ("none", "redis", "rocksdb")

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "ki": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mi": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gi": 1024**3,
    "gib": 1024**3,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_PY_RE = re.compile(r"^3\.\d+(?:\.\d+)?$")


def parse_size(value: int | str, field_name: str) -> int:
    """Bytes from an int or a string such as ``"512m"``, ``"2GiB"``, ``"1.5g"``.

    Bare ``k``/``m``/``g`` are binary, as in ``docker run --memory``; ``kB``/``MB``/``GB`` are
    decimal.
    """
    if isinstance(value, bool):
        raise SpecError(field_name, "a size such as 536870912, '512m' or '2GiB'", value)
    if isinstance(value, int):
        if value < 0:
            raise SpecError(field_name, "a size ≥ 0", value)
        return value
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise SpecError(
            field_name,
            "a size such as 536870912, '512m' or '2GiB' (k, m, g, KiB, MiB, GiB, kB, MB, GB)",
            value,
        )
    return int(float(match.group(1)) * _UNITS[unit])


@dataclass(frozen=True)
class NodeSpec:
    """One Ray node, or a group of ``count`` identical worker nodes."""

    #: Short DNS-safe name; a group of ``count`` > 1 becomes ``name-1`` … ``name-count``.
    name: str = "worker"
    count: int = 1
    #: Logical CPUs announced to Ray (``--num-cpus``).
    num_cpus: float = 1
    num_gpus: float = 0
    #: Container memory limit (cgroup); Ray's memory monitor reads it.
    memory: int | str = "2g"
    #: Object store size (``--object-store-memory``); ``/dev/shm`` is sized to hold it.
    object_store: int | str = "100m"
    #: Logical ``--memory`` resource; None lets Ray derive it from the container limit.
    ray_memory: int | str | None = None
    #: cgroup CPU quota in cores; None leaves the node free to use every host core.
    cpu_limit: float | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Per-node environment (``RAY_*`` config knobs win over the cluster's).
    env: Mapping[str, str] = field(default_factory=dict)
    #: Ray version of this node's image; None means the cluster's.
    ray_version: str | None = None
    #: A ready-made image instead of the one built for ``ray_version``.
    image: str | None = None
    #: Overrides the head address this node joins (worker only), e.g. ``127.0.0.1:6379``.
    head_address: str | None = None
    #: Extra ``ray start`` arguments, passed verbatim (runbook advice under test).
    extra_args: tuple[str, ...] = ()
    #: Boot this node's container and ``ray start`` but do not wait for it to join.
    expect_join: bool = True
    #: tmpfs mounts ``{path: options}``, e.g. ``{"/spill": "size=150m"}`` for a small spill disk.
    tmpfs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", validation.frozen_map(self.resources))
        object.__setattr__(self, "labels", validation.frozen_map(self.labels))
        object.__setattr__(self, "env", validation.frozen_map(self.env))
        object.__setattr__(self, "tmpfs", validation.frozen_map(self.tmpfs))
        if isinstance(self.extra_args, list):
            object.__setattr__(self, "extra_args", tuple(self.extra_args))

    @property
    def memory_bytes(self) -> int:
        return parse_size(self.memory, "memory")

    @property
    def object_store_bytes(self) -> int:
        return parse_size(self.object_store, "object_store")

    @property
    def shm_bytes(self) -> int:
        return self.object_store_bytes + SHM_MARGIN

    def validate(self, where: str) -> None:
        """Raise :class:`SpecError` naming ``where.field`` for the first invalid field."""
        validation.name(self.name, f"{where}.name")
        validation.whole(self.count, f"{where}.count")
        for attr in ("num_cpus", "num_gpus"):
            # Ray's --num-cpus/--num-gpus take whole numbers; a fraction fails `ray start`.
            validation.whole(getattr(self, attr), f"{where}.{attr}", what=f"a whole {attr}")
        if self.cpu_limit is not None:
            validation.number(self.cpu_limit, f"{where}.cpu_limit", positive=True)
        memory = parse_size(self.memory, f"{where}.memory")
        store = parse_size(self.object_store, f"{where}.object_store")
        if self.ray_memory is not None:
            parse_size(self.ray_memory, f"{where}.ray_memory")
        if store < MIN_OBJECT_STORE:
            raise SpecError(
                f"{where}.object_store",
                f"at least {MIN_OBJECT_STORE} bytes (Ray's minimum, 75 MiB)",
                self.object_store,
                hint="use object_store='100m' or more",
            )
        if store + SHM_MARGIN >= memory:
            raise SpecError(
                f"{where}.object_store",
                f"less than the node's memory minus {SHM_MARGIN // 1024**2} MiB for Ray itself "
                f"(memory={self.memory!r})",
                self.object_store,
                hint="raise memory or lower object_store",
            )
        validation.resources(self.resources, f"{where}.resources")
        validation.labels(self.labels, f"{where}.labels")
        validation.env(self.env, f"{where}.env")
        validation.tmpfs(self.tmpfs, f"{where}.tmpfs")
        validation.args(self.extra_args, f"{where}.extra_args")
        validation.flag(self.expect_join, f"{where}.expect_join")
        if self.ray_version is not None:
            validation.release_syntax(self.ray_version, f"{where}.ray_version")
        validation.optional_str(
            self.image, f"{where}.image", "an image reference", validation.IMAGE_RE
        )
        validation.optional_str(
            self.head_address, f"{where}.head_address", "HOST:PORT", re.compile(r"^\S+:\d+$")
        )


@dataclass(frozen=True)
class ClusterSpec:
    """A whole Ray cluster: head, worker groups, an optional zero-CPU driver node, GCS FT."""

    name: str = "cluster"
    ray_version: str = DEFAULT_RAY_VERSION
    python: str = DEFAULT_PYTHON
    #: A ready-made image for every node; None builds ``raychaos/ray:<ray>-py<python>``.
    image: str | None = None
    head: NodeSpec = field(default_factory=lambda: NodeSpec(name="head", num_cpus=1))
    workers: tuple[NodeSpec, ...] = (NodeSpec(name="worker", count=2),)
    #: A zero-CPU node that hosts workload drivers, so killing any other node spares them.
    driver: bool = True
    gcs_ft: GcsFt = "none"
    #: ``RAY_*`` config knobs (and any other env) for every node and every driver.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Seconds to wait for every expected node to be ALIVE in the GCS.
    boot_timeout_s: float = 180.0
    #: Ray's autoscaler on the head, launching node types as containers (None: a fixed cluster).
    autoscaling: Autoscaling | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", validation.frozen_map(self.env))
        if isinstance(self.workers, list):
            object.__setattr__(self, "workers", tuple(self.workers))

    def validate(self) -> ClusterSpec:
        """Return self, or raise one :class:`SpecError` naming the field and the fix."""
        validation.name(self.name, "name")
        validation.release_syntax(self.ray_version, "ray_version")
        if not isinstance(self.python, str) or not _PY_RE.match(self.python):
            raise SpecError("python", "a Python version such as '3.11'", self.python)
        validation.optional_str(self.image, "image", "an image reference", validation.IMAGE_RE)
        if not isinstance(self.gcs_ft, str) or self.gcs_ft not in GCS_FT_CHOICES:
            raise SpecError("gcs_ft", f"one of {', '.join(GCS_FT_CHOICES)}", self.gcs_ft)
        validation.number(self.boot_timeout_s, "boot_timeout_s", positive=True)
        validation.flag(self.driver, "driver")
        validation.env(self.env, "env")
        if not isinstance(self.head, NodeSpec):
            raise SpecError("head", "a node spec such as {'num_cpus': 1}", self.head)
        self.head.validate("head")
        if self.head.count != 1:
            raise SpecError("head.count", "exactly 1", self.head.count)
        if self.head.head_address is not None:
            raise SpecError("head.head_address", "None on the head", self.head.head_address)
        if self.head.name in RESERVED:
            raise SpecError("head.name", f"a name other than {', '.join(RESERVED)}", self.head.name)
        if not isinstance(self.workers, tuple):
            raise SpecError("workers", "a count ≥ 0 or a list of worker groups", self.workers)
        seen = {self.head.name: "head", **dict.fromkeys(RESERVED, "reserved")}
        for index, group in enumerate(self.workers):
            where = f"workers[{index}]"
            if not isinstance(group, NodeSpec):
                raise SpecError(where, "a node spec such as {'name': 'worker', 'count': 2}", group)
            group.validate(where)
            for node in group_names(group):
                if node in seen:
                    raise SpecError(
                        f"{where}.name",
                        f"names unique once groups expand (name-1 … name-count); {node!r} is "
                        f"already {seen[node]}",
                        group.name,
                    )
                seen[node] = where
        if self.autoscaling is not None:
            if not isinstance(self.autoscaling, Autoscaling):
                raise SpecError("autoscaling", "autoscaling settings", self.autoscaling)
            self.autoscaling.validate()
            for kind in self.autoscaling.node_types:
                if kind.name in seen or any(n.startswith(kind.name + "-") for n in seen):
                    raise SpecError(
                        "autoscaling.node_types.name",
                        "a name apart from every node's (its nodes are <name>-<n>)",
                        kind.name,
                    )
            if self.head.num_gpus:
                raise SpecError("head.num_gpus", "0 on an autoscaling head", self.head.num_gpus)
        return self

    def node_names(self) -> list[str]:
        """Names of every Ray node this spec boots, head first, driver last."""
        names = [self.head.name]
        for group in self.workers:
            names.extend(group_names(group))
        if self.driver:
            names.append("driver")
        return names

    def replace(self, **changes: Any) -> ClusterSpec:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Any) -> ClusterSpec:
        """Build from JSON-like data (named topologies, marker kwargs); unknown keys are errors.

        Any input gives a spec or a :class:`SpecError`, never another exception.
        """
        if not isinstance(data, Mapping):
            raise SpecError("cluster", "a mapping of ClusterSpec fields", data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in set(data) - known)
        if unknown:
            raise SpecError("cluster", f"keys among {', '.join(sorted(known))}", ", ".join(unknown))
        values = dict(data)
        head = values.get("head")
        if isinstance(head, Mapping):
            values["head"] = _node_from_dict({"name": "head", **head}, "head")
        elif head is not None and not isinstance(head, NodeSpec):
            raise SpecError("head", "a node spec such as {'num_cpus': 1}", head)
        if values.get("autoscaling") is not None:
            values["autoscaling"] = Autoscaling.from_dict(values["autoscaling"])
        workers = values.get("workers")
        if isinstance(workers, bool) or (isinstance(workers, int) and workers < 0):
            raise SpecError("workers", "a count ≥ 0 or a list of worker groups", workers)
        if isinstance(workers, int):
            values["workers"] = (NodeSpec(name="worker", count=workers),) if workers else ()
        elif isinstance(workers, list | tuple):
            values["workers"] = tuple(
                w if isinstance(w, NodeSpec) else _node_from_dict(w, f"workers[{i}]")
                for i, w in enumerate(workers)
            )
        elif workers is not None:
            raise SpecError("workers", "a count ≥ 0 or a list of worker groups", workers)
        return cls(**values)


RESERVED = ("driver", "redis")


def group_names(group: NodeSpec) -> list[str]:
    if group.count == 1:
        return [group.name]
    return [f"{group.name}-{i}" for i in range(1, group.count + 1)]


def _node_from_dict(data: Any, where: str) -> NodeSpec:
    if not isinstance(data, Mapping):
        raise SpecError(where, "a node spec such as {'name': 'worker', 'count': 2}", data)
    known = {f.name for f in dataclasses.fields(NodeSpec)}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise SpecError(where, f"keys among {', '.join(sorted(known))}", ", ".join(unknown))
    return NodeSpec(**{str(k): v for k, v in data.items()})


def topologies_dir() -> Path:
    """The named topologies shipped with the package (``fixtures/clusters/*.json``)."""
    return fixtures_path("clusters")


def load_topology(name: str) -> ClusterSpec:
    """A named topology from ``fixtures/clusters/<name>.json``.

    ``"knob_presets": ["fast-health-checks", ...]`` names presets of
    :data:`chaos.spec.knobs.PRESETS`, so a knob set is written once, in Python, for the
    experiments and the topologies alike. They merge into ``env`` in order; the topology's own
    ``env`` wins over them.
    """
    path = topologies_dir() / f"{name}.json"
    if not path.is_file():
        available = sorted(p.stem for p in topologies_dir().glob("*.json"))
        raise SpecError("topology", f"one of {', '.join(available)}", name)
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"topology {name}",
            "a JSON object",
            f"{path}: {exc.msg} at line {exc.lineno} column {exc.colno}",
            hint=f"fix the file (`python -m json.tool {path}` shows where)",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"topology {name}", "a readable UTF-8 file", f"{path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise SpecError(
            f"topology {name}",
            "a JSON object of ClusterSpec fields",
            f"{path}: a JSON {type(loaded).__name__}",
        )
    data = cast("dict[str, Any]", loaded)
    data.pop("description", None)
    presets = data.pop("knob_presets", [])
    if not isinstance(presets, list) or not all(isinstance(p, str) for p in presets):
        raise SpecError("knob_presets", "a list of preset names", presets)
    if presets:
        env: dict[str, Any] = {}
        for preset in presets:
            if preset not in PRESETS:
                raise SpecError(
                    "knob_presets",
                    f"one of {', '.join(sorted(PRESETS))}",
                    preset,
                    hint="presets are defined in chaos.spec.knobs.PRESETS",
                )
            env.update(PRESETS[preset])
        own = data.get("env") or {}
        if not isinstance(own, dict):
            raise SpecError("env", "an object of environment variables", own)
        data["env"] = {**env, **own}
    return ClusterSpec.from_dict(data)


def releases_available(spec: ClusterSpec) -> ClusterSpec:
    """``spec``, once every Ray release it names can be installed (shipped, a wheel given, or
    on the package index: :func:`chaos.spec.validation.ray_version`, which may ask the index);
    else :class:`SpecError` naming the field. Called at collection and at boot, never when a
    spec is built: a spec is data."""
    validation.ray_version(spec.ray_version, "ray_version")
    groups = [("head", spec.head), *((f"workers[{i}]", w) for i, w in enumerate(spec.workers))]
    for where, node in groups:
        if node.ray_version is not None:
            validation.ray_version(node.ray_version, f"{where}.ray_version")
    return spec
