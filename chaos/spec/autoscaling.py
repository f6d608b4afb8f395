"""Autoscaling as a spec option: node types and caps for Ray's own autoscaler on the head.

The head runs Ray's real autoscaler (the monitor process) with Ray's fake multi-node Docker
provider (``FakeMultiNodeDockerProvider``): the provider writes the nodes it wants into a
directory on the head, and the harness plays the provider's host side, creating and removing
the containers (:mod:`chaos.cluster.autoscaler`). This module is the spec and the cluster
config the head reads; it is validated before any Docker object exists.

Ray's wheel ships the provider but not its defaults file (``example_docker.yaml``), which
Ray merges under every config of provider type ``fake_multinode_docker``. The config names
the same class as an ``external`` provider instead, whose defaults are built in, and states
every top-level key itself (docs/autoscale.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import chaos.spec.validation as validation
from chaos.errors import SpecError

#: The provider's directory on the head (the harness reads and writes it through the engine).
STATE_DIR = "/raychaos/autoscaler"
BOOTSTRAP_CONFIG = f"{STATE_DIR}/bootstrap_config.yaml"
#: Ray's provider class, named as an external provider (see the module docstring).
PROVIDER_MODULE = (
    "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeDockerProvider"
)
#: The provider's fixed head id (``FAKE_HEAD_NODE_ID``); it is also the head's Ray node id.
HEAD_ID = "f" * 51 + "00000"
HEAD_TYPE = "ray.head.default"
#: Worker ids are ``HEAD_ID``'s prefix and a 5-digit counter (``_next_hex_node_id``).
ID_PREFIX = "f" * 51
VERSIONS = ("v1", "v2")


@dataclass(frozen=True)
class NodeType:
    """One kind of worker the autoscaler may launch."""

    #: The type's name in Ray's config; its nodes are named ``<name>-<n>`` (DNS-safe).
    name: str
    num_cpus: float = 1
    resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    min_workers: int = 0
    max_workers: int = 2
    memory: int | str = "1g"
    object_store: int | str = "100m"
    #: Extra ``ray start`` arguments of this type's nodes (a broken start command, a test).
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", validation.frozen_map(self.resources))
        object.__setattr__(self, "labels", validation.frozen_map(self.labels))
        if isinstance(self.extra_args, list):
            object.__setattr__(self, "extra_args", tuple(self.extra_args))

    def validate(self, where: str) -> None:
        # A node name of the type plus "-NNN" must stay a node name (≤ 20 characters).
        validation.name(self.name, f"{where}.name")
        if len(self.name) > 15:
            raise SpecError(f"{where}.name", "at most 15 characters (nodes add -<n>)", self.name)
        validation.whole(self.num_cpus, f"{where}.num_cpus", what="a whole num_cpus")
        validation.resources(self.resources, f"{where}.resources")
        validation.labels(self.labels, f"{where}.labels")
        validation.args(self.extra_args, f"{where}.extra_args")
        low = validation.whole(self.min_workers, f"{where}.min_workers")
        high = validation.whole(self.max_workers, f"{where}.max_workers")
        if low > high:
            raise SpecError(
                f"{where}.min_workers", f"at most max_workers ({high})", self.min_workers
            )

    def ray_resources(self) -> dict[str, float]:
        """The type's resources as Ray's config states them (``CPU`` included)."""
        return {"CPU": float(self.num_cpus), **{k: float(v) for k, v in self.resources.items()}}


@dataclass(frozen=True)
class Autoscaling:
    """Ray's autoscaler on the head, launching ``node_types`` as the harness's containers."""

    node_types: tuple[NodeType, ...] = (NodeType(name="cpu"),)
    #: Worker nodes in the whole cluster (the head not counted).
    max_workers: int = 2
    #: Ray's default is 5; experiments shorten it and say so in their evidence.
    idle_timeout_minutes: float = 5.0
    upscaling_speed: float = 1.0
    #: Autoscaler v1 (``ray start``'s default) or v2 (``RAY_enable_autoscaler_v2=1``).
    version: str = "v1"
    #: ``AUTOSCALER_UPDATE_INTERVAL_S``: seconds between the autoscaler's rounds (Ray: 5).
    update_interval_s: float = 5.0
    #: The provider drops a node not reported running for this long (Ray's default 9.5 s).
    cleanup_interval_s: float = 9.5

    def __post_init__(self) -> None:
        if isinstance(self.node_types, list):
            object.__setattr__(self, "node_types", tuple(self.node_types))

    def validate(self, where: str = "autoscaling") -> Autoscaling:
        if not isinstance(self.node_types, tuple) or not self.node_types:
            raise SpecError(
                f"{where}.node_types", "a non-empty list of node types", self.node_types
            )
        seen: set[str] = set()
        for index, kind in enumerate(self.node_types):
            here = f"{where}.node_types[{index}]"
            if not isinstance(kind, NodeType):
                raise SpecError(here, "a node type such as {'name': 'cpu', 'num_cpus': 1}", kind)
            kind.validate(here)
            if kind.name in seen:
                raise SpecError(f"{here}.name", "a name no other node type has", kind.name)
            seen.add(kind.name)
        cap = validation.whole(self.max_workers, f"{where}.max_workers")
        floor = sum(int(k.min_workers) for k in self.node_types)
        if floor > cap:
            # Ray's docs: the sum of min_workers must not exceed the cluster's max_workers.
            raise SpecError(
                f"{where}.max_workers", f"at least the node types' min_workers ({floor})", cap
            )
        validation.number(self.idle_timeout_minutes, f"{where}.idle_timeout_minutes")
        validation.number(self.upscaling_speed, f"{where}.upscaling_speed")
        validation.number(self.update_interval_s, f"{where}.update_interval_s", positive=True)
        validation.number(self.cleanup_interval_s, f"{where}.cleanup_interval_s", positive=True)
        if self.version not in VERSIONS:
            raise SpecError(f"{where}.version", f"one of {', '.join(VERSIONS)}", self.version)
        return self

    def node_type(self, name: str) -> NodeType | None:
        return next((k for k in self.node_types if k.name == name), None)

    @classmethod
    def from_dict(cls, data: Any, where: str = "autoscaling") -> Autoscaling:
        if isinstance(data, Autoscaling):
            return data
        if not isinstance(data, Mapping):
            raise SpecError(where, "a mapping of Autoscaling fields", data)
        values = dict(_known(cls, data, where))
        kinds = values.get("node_types")
        if isinstance(kinds, list | tuple):
            values["node_types"] = tuple(
                k if isinstance(k, NodeType) else NodeType(**_known(NodeType, k, f"{where}[{i}]"))
                for i, k in enumerate(kinds)
            )
        return cls(**values)


def _known(cls: type, data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(where, f"a mapping of {cls.__name__} fields", data)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        raise SpecError(where, f"keys among {', '.join(sorted(known))}", ", ".join(unknown))
    return {str(k): v for k, v in data.items()}


def cluster_config(
    autoscaling: Autoscaling, *, cluster_name: str, head_cpus: float
) -> dict[str, Any]:
    """The cluster config the head's autoscaler reads (JSON, which YAML reads too).

    Every top-level key is stated, so nothing is merged in from defaults Ray would pick.
    """
    types: dict[str, Any] = {
        HEAD_TYPE: {"resources": {"CPU": float(head_cpus)}, "node_config": {}, "max_workers": 0}
    }
    for kind in autoscaling.node_types:
        types[kind.name] = {
            "resources": kind.ray_resources(),
            "node_config": {},
            "min_workers": int(kind.min_workers),
            "max_workers": int(kind.max_workers),
        }
        if kind.labels:
            types[kind.name]["labels"] = dict(kind.labels)
    return {
        "cluster_name": cluster_name,
        "max_workers": int(autoscaling.max_workers),
        "upscaling_speed": float(autoscaling.upscaling_speed),
        "idle_timeout_minutes": float(autoscaling.idle_timeout_minutes),
        "provider": {
            "type": "external",
            "module": PROVIDER_MODULE,
            "disable_launch_config_check": True,
            "disable_node_updaters": True,
            # Read by the provider, unused by the harness (it picks image and network itself).
            "project_name": cluster_name,
            "image": "raychaos",
            "shared_volume_dir": STATE_DIR,
            "head_resources": {"CPU": float(head_cpus), "GPU": 0},
            "cleanup_interval": float(autoscaling.cleanup_interval_s),
        },
        "auth": {"ssh_user": "root"},
        "available_node_types": types,
        "head_node_type": HEAD_TYPE,
        "docker": {},
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def head_env(autoscaling: Autoscaling) -> dict[str, str]:
    """What the head's ``ray start`` needs so its monitor runs the provider."""
    env = {
        # The provider refuses to start without it (FakeMultiNodeProvider.__init__).
        "RAY_FAKE_CLUSTER": "1",
        "RAY_OVERRIDE_NODE_ID_FOR_TESTING": HEAD_ID,
        "AUTOSCALER_UPDATE_INTERVAL_S": _num(autoscaling.update_interval_s),
    }
    if autoscaling.version == "v2":
        # v2 matches Ray nodes to instances by these (the head's instance must reach
        # RAY_RUNNING before v2 scales anything).
        env.update(
            {
                "RAY_enable_autoscaler_v2": "1",
                "RAY_CLOUD_INSTANCE_ID": HEAD_ID,
                "RAY_NODE_TYPE_NAME": HEAD_TYPE,
            }
        )
    return env


def worker_env(node_id: str, node_type: str) -> dict[str, str]:
    """A launched worker's identity as the provider and both autoscalers match it."""
    return {
        "RAY_OVERRIDE_NODE_ID_FOR_TESTING": node_id,
        "RAY_CLOUD_INSTANCE_ID": node_id,
        "RAY_NODE_TYPE_NAME": node_type,
    }


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
