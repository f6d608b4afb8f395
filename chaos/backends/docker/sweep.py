"""Remove Docker objects whose run is gone, and nothing that might still be in use.

The next run's safety net, for what no reaper (:mod:`chaos.backends.docker.reaper`) could
remove: a reaper killed along with its owner (a CI job's whole cgroup), a reboot, an engine that
was unreachable. An object is removed only when its owner is provably dead
(:func:`chaos.labels.judge`): same machine, and another boot or — same boot and PID namespace,
/proc readable — the PID gone or reused. Unknown means keep: objects of other machines, other
PID namespaces, unreadable /proc, older labels that prove nothing. Clusters kept for inspection
(``--raychaos-keep``) are kept until ``raychaos sweep --kept`` (or ``--cluster KEY``);
``raychaos sweep --all`` removes every raychaos object, live runs included.

Objects whose owner cannot be judged from here (a shared remote engine, used by machines that
may be gone) are never removed on that ground alone. ``raychaos sweep --older-than 2d`` (with
``--docker-host URL`` for a remote engine) removes them once their run made nothing within the
given age — asked for by a person, never done automatically: an old run may still be live.

Per engine: a sweep looks at the one engine it is given (a run spread over several engines
sweeps each on first use, :mod:`chaos.backends.docker.engines`). A kept cluster's marker names
its engine, so sweeping one engine never forgets the markers of clusters kept on another.

Removal helpers live here too: parallel, each engine call bounded, "already gone" is success.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from chaos import labels
from chaos.backends.docker.client import first_line
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

#: Why an owner is not provably dead, where nothing here proves it alive either: with
#: ``older_than`` the sweep may remove such objects. (Owner alive and kept clusters: never.)
UNPROVEN = frozenset(
    {
        labels.OTHER_MACHINE,
        labels.OTHER_PIDNS,
        labels.UNREADABLE,
        labels.NO_OWNER,
        labels.UNKNOWN_BOOT,
        labels.CLONED,
        labels.LEGACY,
    }
)
AGE_UNKNOWN = "age unknown"

_GONE = ("no such", "not found", "already in progress")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
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
            return f"{kind} {obj.name}: {first_line(exc)}"
        return None

    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(objects))) as pool:
        outcomes = list(pool.map(one, objects))
    removed = [f"{kind} {o.name}" for o, err in zip(objects, outcomes, strict=True) if not err]
    return removed, [err for err in outcomes if err]


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
        return timestamp(self.obj.attrs.get("CreatedAt" if self.kind == "volume" else "Created"))

    @property
    def run(self) -> str:
        """What its age is judged with: its run (else its cluster, else itself)."""
        found = self.labels
        return found.get(labels.RUN) or found.get(labels.CLUSTER) or f"{self.kind} {self.name}"


def timestamp(raw: object) -> float | None:
    """An engine's time stamp (``2024-05-01T12:34:56.123456789Z``) in seconds since the epoch."""
    match = _CREATED.match(str(raw or ""))
    if match is None:
        return None
    offset = match.group(2) or "Z"
    return datetime.fromisoformat(match.group(1) + offset.replace("Z", "+00:00")).timestamp()


def engine_now(client: docker.DockerClient) -> float:
    """The engine's clock (ages are differences of its own time stamps), else this host's."""
    with contextlib.suppress(Exception):
        now = timestamp(client.info().get("SystemTime"))
        if now is not None:
            return now
    return time.time()


def parse_age(raw: str) -> float:
    """``"90m"``, ``"6h"``, ``"2d"``, ``"1w"``, ``"1h30m"`` or bare seconds → seconds (> 0)."""
    text = raw.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    elif text and re.fullmatch(f"(?:{_AGE.pattern})+", text):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _AGE.findall(text))
    else:
        raise ValueError(f"expected a duration such as 6h, 2d, 90m or 1h30m, got {raw!r}")
    if seconds <= 0:
        raise ValueError(f"expected a duration > 0 such as 6h or 2d, got {raw!r}")
    return seconds


def span(seconds: float) -> str:
    """A duration as a person reads it: ``45 s``, ``12 min``, ``9.3 h``, ``2.0 d``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


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
    #: Why an object was removed though its owner is not provably dead ("container x" → why).
    why: dict[str, str] = field(default_factory=dict)

    @property
    def unproven(self) -> int:
        """Objects kept only because nothing here can judge their owner (``older_than``
        could remove them)."""
        return sum(n for reason, n in self.kept.items() if reason in UNPROVEN)

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
    older_than: float | None = None,
) -> SweepReport:
    """Remove the objects of dead owners (default), of kept clusters (``kept_only``), of one
    cluster (``cluster``), or every raychaos object (``everything``) on the engine of
    ``client`` — whose URL is ``engine`` (None: the engine of DOCKER_HOST), so that only
    markers of clusters kept on it are forgotten.

    ``older_than`` (seconds; asked for by a person, never automatic) also removes objects
    whose owner nothing here can judge (:data:`UNPROVEN`: another machine's runs on a shared
    engine) once their run made nothing for that long, by the engine's clock; a run with an
    object younger than that, or an owner alive here, keeps all of its objects."""
    here = here or labels.Here.current()
    kept = kept_clusters()
    report = SweepReport()
    selector: dict[str, str | list[str] | bool] | None = None
    if cluster is not None:
        selector = {"label": f"{labels.CLUSTER}={cluster}"}
    from chaos.backends.docker.client import translated

    with translated("list raychaos objects (sweep)"):
        found = inventory(client, selector)
    decided = [
        (
            leftover,
            _keep_reason(
                leftover,
                here,
                kept,
                everything=everything or cluster is not None,
                kept_only=kept_only,
            ),
        )
        for leftover in found
    ]
    if older_than is not None:
        decided = _by_age(decided, older_than, engine_now(client), report)
    doomed: list[Leftover] = []
    for leftover, reason in decided:
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


def _by_age(
    decided: list[tuple[Leftover, str | None]], older_than: float, now: float, report: SweepReport
) -> list[tuple[Leftover, str | None]]:
    """Turn "unproven" keeps into removals for runs whose newest object is older than
    ``older_than`` and whose owner is not alive here; say why in ``report.why``."""
    newest: dict[str, float | None] = {}
    alive: set[str] = set()
    for leftover, reason in decided:
        created, run = leftover.created, leftover.run
        before = newest.get(run, float("-inf"))
        newest[run] = None if created is None or before is None else max(before, created)
        if reason in (labels.OWNER_ALIVE, KEPT):
            alive.add(run)
    result: list[tuple[Leftover, str | None]] = []
    for leftover, reason in decided:
        run = leftover.run
        if reason not in UNPROVEN or run in alive:
            result.append((leftover, reason))
            continue
        last = newest[run]
        if last is None:
            result.append((leftover, f"{reason}, {AGE_UNKNOWN}"))
        elif now - last <= older_than:
            result.append((leftover, f"{reason}, younger than {span(older_than)}"))
        else:
            report.why[f"{leftover.kind} {leftover.name}"] = (
                f"{reason}; its run's newest object is {span(now - last)} old"
            )
            result.append((leftover, None))
    return result


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
