"""Remove Docker objects whose run is gone, and nothing that might still be in use.

The next run's safety net, for what no reaper (:mod:`chaos.backends.docker.reaper`) could
remove: a reaper killed along with its owner (a CI job's whole cgroup), a reboot, an engine that
was unreachable. An object is removed only when its owner is provably dead
(:func:`chaos.labels.judge`): same machine, and another boot or — same boot and PID namespace,
/proc readable — the PID gone or reused. Unknown means keep: objects of other machines, other
PID namespaces, unreadable /proc, older labels that prove nothing. Clusters kept for inspection
(``--raychaos-keep``) are kept until ``raychaos sweep --kept`` (or ``--cluster KEY``);
``raychaos sweep --all`` removes every raychaos object, live runs included.

Per engine: a sweep looks at the one engine it is given (a run spread over several engines
sweeps each on first use, :mod:`chaos.backends.docker.engines`). A kept cluster's marker names
its engine, so sweeping one engine never forgets the markers of clusters kept on another.

Removal helpers live here too: parallel, each engine call bounded, "already gone" is success.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from chaos import labels
from chaos.resources import default_cache_dir

if TYPE_CHECKING:
    import docker

ObjectKind = Literal["container", "network", "volume"]
#: Engine objects in the order they must go (a network in use cannot be removed).
KINDS: tuple[ObjectKind, ...] = ("container", "network", "volume")
#: Bound on one removal call; a container's removal is a SIGKILL and a delete (seconds).
REMOVE_TIMEOUT_S = 20.0
PARALLEL = 8
KEPT = "kept for inspection"

_GONE = ("no such", "not found", "already in progress")
_CREATED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$")


# -- kept clusters --------------------------------------------------------------------------
def kept_dir() -> Path:
    """Markers of clusters kept for inspection (labels cannot be added to a live container)."""
    return default_cache_dir() / "kept"


def keep(cluster_key: str, engine: str = "") -> None:
    """Mark ``cluster_key`` kept for inspection; the marker names its engine (URL; "" for the
    engine of DOCKER_HOST)."""
    kept_dir().mkdir(parents=True, exist_ok=True)
    (kept_dir() / cluster_key).write_text(engine)


def engine_of_marker(cluster_key: str) -> str:
    """The engine a kept cluster is on (markers without one: the engine of DOCKER_HOST)."""
    from chaos.backends.docker.engines import default_url

    try:
        recorded = (kept_dir() / cluster_key).read_text().strip()
    except OSError:
        recorded = ""
    return recorded or default_url()


def kept_clusters() -> set[str]:
    directory = kept_dir()
    return {p.name for p in directory.iterdir()} if directory.is_dir() else set()


def unkeep(cluster_key: str) -> None:
    (kept_dir() / cluster_key).unlink(missing_ok=True)


# -- removal --------------------------------------------------------------------------------
def already_gone(exc: BaseException) -> bool:
    """The object is gone, or the engine is removing it already (a concurrent sweep/reaper)."""
    if type(exc).__name__ == "NotFound":
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _GONE)


def remove(kind: ObjectKind, obj: Any, timeout: float = REMOVE_TIMEOUT_S) -> None:
    """Remove one engine object, the HTTP call bounded by ``timeout`` (containers: forced,
    with their anonymous volumes). An object already gone is not an error."""
    path = {"container": "/containers/{0}", "network": "/networks/{0}", "volume": "/volumes/{0}"}
    params = {"container": {"force": True, "v": True}, "network": {}, "volume": {"force": True}}
    api = getattr(getattr(obj, "client", None), "api", None)
    try:
        if api is not None and hasattr(api, "_delete"):
            # docker-py's remove() has no per-call timeout; its own request helpers take one.
            response = api._delete(
                api._url(path[kind], obj.id), params=params[kind], timeout=timeout
            )
            api._raise_for_status(response)
        elif kind == "container":
            obj.remove(force=True, v=True)
        elif kind == "volume":
            obj.remove(force=True)
        else:
            obj.remove()
    except Exception as exc:
        if not already_gone(exc):
            raise


def remove_parallel(
    kind: ObjectKind, objects: Sequence[Any], timeout: float = REMOVE_TIMEOUT_S
) -> tuple[list[str], list[str]]:
    """Remove ``objects`` (all of one kind) concurrently: (removed names, failures)."""
    if not objects:
        return [], []

    def one(obj: Any) -> str | None:
        try:
            remove(kind, obj, timeout)
        except Exception as exc:  # noqa: BLE001 - report it, remove the rest regardless
            return f"{kind} {obj.name}: {_first_line(exc)}"
        return None

    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(objects))) as pool:
        outcomes = list(pool.map(one, objects))
    removed = [f"{kind} {o.name}" for o, err in zip(objects, outcomes, strict=True) if not err]
    return removed, [err for err in outcomes if err]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# -- what is there --------------------------------------------------------------------------
@dataclass(frozen=True)
class Leftover:
    """One raychaos object on the engine."""

    kind: ObjectKind
    obj: Any

    @property
    def name(self) -> str:
        return str(self.obj.name)

    @property
    def labels(self) -> dict[str, str]:
        if self.kind == "container":
            return dict(self.obj.labels or {})
        return dict(self.obj.attrs.get("Labels") or {})

    @property
    def cluster(self) -> str:
        return self.labels.get(labels.CLUSTER, "")

    @property
    def created(self) -> float | None:
        """Creation time on the engine's clock (seconds since the epoch), if it says."""
        raw = self.obj.attrs.get("CreatedAt" if self.kind == "volume" else "Created")
        match = _CREATED.match(str(raw or ""))
        if match is None:
            return None
        offset = match.group(2) or "Z"
        return datetime.fromisoformat(match.group(1) + offset.replace("Z", "+00:00")).timestamp()


def inventory(
    client: docker.DockerClient, selector: dict[str, str | list[str] | bool] | None = None
) -> list[Leftover]:
    """Every raychaos container, network and volume (``selector``: docker filters)."""
    filters: dict[str, str | list[str] | bool] = selector or {"label": labels.RUN}
    # ignore_removed: docker-py inspects each listed container; a parallel run may remove one.
    containers = client.containers.list(all=True, ignore_removed=True, filters=filters)
    return (
        [Leftover("container", c) for c in containers]
        + [Leftover("network", n) for n in client.networks.list(filters=filters)]
        + [Leftover("volume", v) for v in client.volumes.list(filters=filters)]
    )


def remove_leftovers(
    leftovers: Sequence[Leftover], timeout: float = REMOVE_TIMEOUT_S
) -> tuple[list[str], list[str]]:
    """Containers (in parallel), then networks, then volumes: (removed, failures)."""
    removed: list[str] = []
    failed: list[str] = []
    for kind in KINDS:
        done, errors = remove_parallel(kind, [x.obj for x in leftovers if x.kind == kind], timeout)
        removed += done
        failed += errors
    return removed, failed


# -- the sweep ------------------------------------------------------------------------------
@dataclass
class SweepReport:
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: Objects left in place, counted by reason (owner alive, other machine, …).
    kept: Counter[str] = field(default_factory=Counter)

    def __str__(self) -> str:
        text = f"removed {len(self.removed)} leftover object(s)"
        if self.kept:
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(self.kept.items()))
            text += f"; kept {sum(self.kept.values())} ({reasons})"
        if self.failed:
            text += f"; could not remove: {', '.join(self.failed)}"
        return text


def sweep(
    client: docker.DockerClient,
    *,
    everything: bool = False,
    kept_only: bool = False,
    cluster: str | None = None,
    here: labels.Here | None = None,
    engine: str | None = None,
) -> SweepReport:
    """Remove the objects of dead owners (default), of kept clusters (``kept_only``), of one
    cluster (``cluster``), or every raychaos object (``everything``) on the engine of
    ``client`` — whose URL is ``engine`` (None: the engine of DOCKER_HOST), so that only
    markers of clusters kept on it are forgotten."""
    here = here or labels.Here.current()
    kept = kept_clusters()
    report = SweepReport()
    selector: dict[str, str | list[str] | bool] | None = None
    if cluster is not None:
        selector = {"label": f"{labels.CLUSTER}={cluster}"}
    found = inventory(client, selector)
    doomed: list[Leftover] = []
    for leftover in found:
        reason = _keep_reason(
            leftover, here, kept, everything=everything or cluster is not None, kept_only=kept_only
        )
        if reason is None:
            doomed.append(leftover)
        elif reason:
            report.kept[reason] += 1
    report.removed, report.failed = remove_leftovers(doomed)
    if cluster is None:
        from chaos.backends.docker.engines import default_url

        here_engine = engine or default_url()
        mine = {key for key in kept if engine_of_marker(key) == here_engine}
        _forget_markers(mine, found, report, everything=everything, kept_only=kept_only)
    elif not report.failed:
        unkeep(cluster)
    return report


def _keep_reason(
    leftover: Leftover, here: labels.Here, kept: set[str], *, everything: bool, kept_only: bool
) -> str | None:
    """None: remove it; a reason to keep it; "" to leave it unmentioned (not asked about)."""
    if everything:
        return None
    if kept_only:
        return None if leftover.cluster in kept else ""
    if leftover.cluster and leftover.cluster in kept:
        return KEPT
    verdict = labels.judge(leftover.labels, here, leftover.created)
    return None if verdict.dead else verdict.reason


def _forget_markers(
    kept: set[str],
    found: Sequence[Leftover],
    report: SweepReport,
    *,
    everything: bool,
    kept_only: bool,
) -> None:
    """Drop markers of clusters that were removed, and of clusters with no object left."""
    present = {x.cluster for x in found}
    failed_clusters = {
        x.cluster for x in found if any(f.startswith(f"{x.kind} {x.name}:") for f in report.failed)
    }
    for key in kept:
        removed_now = everything or kept_only
        if (removed_now or key not in present) and key not in failed_clusters:
            unkeep(key)
