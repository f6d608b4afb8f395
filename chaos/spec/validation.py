"""Field checks for cluster specs: each raises one :class:`SpecError` (field, expected, got, hint).

Specs come from markers, JSON topologies and users' code, so every value is checked for its
type as well as its range: a wrong type must never surface later as a ``TypeError`` from deep
inside the backend, and nothing may reach Docker before the whole spec is known to be good.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import chaos.spec.releases as releases
from chaos.errors import SpecError

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION_RE = releases.VERSION_RE
IMAGE_RE = re.compile(r"^[\w][\w./:@-]*$")
#: Ray's ``--labels`` is ``k=v,k=v``: neither may hold a separator.
LABEL_RE = re.compile(r"^[^,=\s]+$")
#: Paths a tmpfs would hide something the node needs (Ray's venv, the agent, the kernel's).
TMPFS_FORBIDDEN = ("/opt/ray", "/raychaos", "/proc", "/sys", "/dev", "/usr", "/bin", "/lib")


def frozen_map(value: Any) -> Any:
    """A read-only copy of a mapping field (None: empty); a value of the wrong type is kept as
    given, for validate() to name it."""
    if value is None:
        return MappingProxyType({})
    return MappingProxyType(dict(value)) if isinstance(value, Mapping) else value


def name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise SpecError(
            where,
            "a DNS-safe name: lowercase letter first, then [a-z0-9-], at most 20 characters",
            value,
        )
    return value


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(where, "true or false", value)
    return value


def whole(value: Any, where: str, *, minimum: int = 0, what: str = "a whole number") -> int:
    """A whole number ≥ ``minimum``; an integral float (``2.0``) is accepted, ``True`` is not."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value != int(value) or value < minimum:
        raise SpecError(where, f"{what} ≥ {minimum}", value)
    return int(value)


def number(value: Any, where: str, *, positive: bool = False) -> float:
    """A finite number ≥ 0 (> 0 when ``positive``); never a bool, NaN or infinity."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise SpecError(where, f"a finite number {'>' if positive else '≥'} 0", value)
    return float(value)


def mapping(value: Any, where: str, example: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(where, f"a mapping such as {example}", value)
    return value


def env(value: Any, where: str) -> None:
    for key, item in mapping(value, where, "{'RAY_health_check_period_ms': '1000'}").items():
        if not isinstance(key, str) or not ENV_RE.match(key):
            raise SpecError(where, "environment variable names", key)
        if not isinstance(item, str):
            raise SpecError(f"{where}[{key!r}]", "a string value", item, hint="quote numbers")


def labels(value: Any, where: str) -> None:
    for key, item in mapping(value, where, "{'zone': 'a'}").items():
        for part, text in (("key", key), ("value", item)):
            if not isinstance(text, str) or not LABEL_RE.match(text):
                raise SpecError(
                    f"{where}[{key!r}]",
                    f"a label {part} without ',', '=' or spaces (Ray's --labels is k=v,k=v)",
                    text,
                )


def resources(value: Any, where: str) -> None:
    for key, amount in mapping(value, where, "{'gpu_type_a100': 1}").items():
        if not isinstance(key, str) or not key:
            raise SpecError(where, "resource names (non-empty strings)", key)
        number(amount, f"{where}[{key!r}]")


def tmpfs(value: Any, where: str) -> None:
    for path, options in mapping(value, where, "{'/spill': 'size=150m'}").items():
        if not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == "":
            raise SpecError(where, "absolute paths other than /", path)
        clean = "/" + "/".join(p for p in path.split("/") if p)
        if clean == "/dev/shm" or any(
            clean == f or clean.startswith(f + "/") for f in TMPFS_FORBIDDEN
        ):
            raise SpecError(
                where,
                f"a path outside /dev/shm and {', '.join(TMPFS_FORBIDDEN)}",
                path,
                hint="the node needs what is there; use e.g. /spill",
            )
        if not isinstance(options, str):
            raise SpecError(f"{where}[{path!r}]", "mount options such as 'size=150m'", options)


def args(value: Any, where: str) -> None:
    if isinstance(value, str) or not isinstance(value, tuple | list):
        raise SpecError(where, "a list of arguments such as ['--min-worker-port=10002']", value)
    for arg in value:
        if not isinstance(arg, str):
            raise SpecError(where, "arguments as strings", arg)


def optional_str(value: Any, where: str, expected: str, pattern: re.Pattern[str]) -> None:
    if value is not None and (not isinstance(value, str) or not pattern.match(value)):
        raise SpecError(where, expected, value)


def release_syntax(value: Any, where: str) -> str:
    """A Ray release as written (``2.60.0``, ``2.61.0rc1``, ``2.60.0+mycorp.1``): the pure
    half of :func:`ray_version`, all a spec checks (a spec is data; whether the release can
    be installed is asked at collection and at boot)."""
    if not isinstance(value, str) or not VERSION_RE.match(value):
        raise SpecError(
            where,
            "a Ray release such as '2.60.0' (or '2.61.0rc1', '2.60.0+mycorp.1')",
            value,
            hint="pass --raychaos-ray-version X.Y.Z",
        )
    return value


def ray_version(value: Any, where: str) -> str:
    """A Ray release the images can install: shipped with raychaos, given as a wheel
    (``--raychaos-ray-wheel``), or on the package index pip is configured with. The one check
    of a release's availability: the plugin at collection, a cluster at boot, the CLI,
    settings and the report commands all call it."""
    release = release_syntax(value, where)
    # A shipped release needs no query: a run of one never waits on the network here (its
    # image build may still download wheels once). Only a version raychaos does not list asks
    # the index, and a cached answer that lacks it is asked again (published since?).
    if release in releases.shipped() or releases.local(release):
        return release
    answer = releases.index_releases()
    if not answer.has(release) and answer.cached:
        answer = releases.index_releases(refresh=True)
    if answer.has(release):
        return release
    if answer.unreachable:
        where_from = f"package index not reachable ({answer.unreachable}); shipped with raychaos"
    elif not answer.versions:
        where_from = "the package index has no cp311 manylinux wheels of ray; shipped with raychaos"
    else:
        where_from = "nearest on the package index"
    pool = answer.versions or releases.shipped()
    near = ", ".join(releases.nearest(release, pool))
    raise SpecError(
        where,
        "a Ray release with cp311 manylinux wheels on the configured package index",
        value,
        hint=f"{where_from}: {near} (newest {pool[-1]}); a build of your own: "
        "--raychaos-ray-wheel PATH",
    )
