"""A node's worst stretch of CPU stall: the arithmetic a boot and a body are judged with.

Pure functions over ``cpu_stall`` events (each node's cumulative stall seconds, sampled by
:class:`chaos.cluster.stalls.StallSampler`): a node's worst stretch of :data:`STRETCH_S`
seconds in a window, and whether it is :func:`material`. :mod:`chaos.check.stalls` judges a
body's windows with them; :mod:`chaos.cluster.readiness` a boot that timed out
(:func:`boot_stall`). Why these numbers: :mod:`chaos.check.stalls`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from chaos.cluster.stalls import PERIOD_S
from chaos.history import Event, Kind

#: The stretch a stall is measured over: a health check's timeout and one period
#: (``FAST_HEALTH_CHECKS``: ``RAY_health_check_timeout_ms`` 3000 + period 1000, rounded up),
#: the shortest window the experiments judge against a knob.
STRETCH_S = 5.0
#: The part of a stretch a node's processes may all wait for a CPU before its window is
#: inconclusive: 3 s of the 5 s, the health-check timeout (``RAY_health_check_timeout_ms``
#: 3000 with ``FAST_HEALTH_CHECKS``) — a node stalled that long may miss a check for no fault
#: of Ray's. Measured on 6 December 2026 (2.60.0): an otherwise idle machine at -n 2 (NODE,
#: TASK and SERVE, 9 experiments) gave 0.13-0.49 at worst (a Serve driver's load client);
#: runs beside other helpers' clusters (load 13-50) 0.56-0.90 on the runs they voided.
STALLED_FRACTION = 0.6
#: The stretch a boot's stall is measured over: the longest fixed wait a starting node cannot
#: stretch, the raylet's 15 s for its dashboard agent's port file (``node_manager.cc``: the
#: raylet aborts when it is not written in time; the abort of the -n 4 night of 6 December
#: 2026). A node waiting for a CPU :data:`STALLED_FRACTION` of that while it boots may miss it
#: for no fault of Ray's.
BOOT_STRETCH_S = 15.0


@dataclass(frozen=True)
class Stall:
    """The worst stretch of one node inside a judged window."""

    node: str
    #: Seconds the node's processes waited for a CPU within the stretch.
    stalled_s: float
    #: The stretch: start and end (wall clock), as far apart as the samples allow.
    start: float
    end: float
    #: The judged window, for the reader.
    window: tuple[float, float]

    @property
    def stretch_s(self) -> float:
        return self.end - self.start

    @property
    def fraction(self) -> float:
        return self.stalled_s / self.stretch_s if self.stretch_s > 0 else 0.0

    def __str__(self) -> str:
        at = datetime.fromtimestamp(self.start, UTC).strftime("%H:%M:%S")
        low, high = self.window
        return (
            f"{self.node} stalled {self.stalled_s:.1f} s of the {self.stretch_s:.1f} s from "
            f"{at} UTC ({self.fraction:.0%}), in the {high - low:.1f} s judged window"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "stalled_s": round(self.stalled_s, 3),
            "stretch_s": round(self.stretch_s, 3),
            "fraction": round(self.fraction, 3),
            "start": self.start,
            "end": self.end,
            "window": list(self.window),
        }


def series(events: Iterable[Event]) -> dict[str, list[tuple[float, float]]]:
    """node → (time, cumulative stall seconds) from ``cpu_stall`` events, oldest first."""
    found: dict[str, list[tuple[float, float]]] = {}
    for event in sorted((e for e in events if e.kind == Kind.CPU_STALL), key=lambda e: e.t):
        stalled: Mapping[str, float] = event.get("stalled") or {}
        for node, value in stalled.items():
            found.setdefault(node, []).append((event.t, float(value)))
    return found


def worst_stretch(
    points: Sequence[tuple[float, float]],
    start: float,
    end: float,
    stretch_s: float = STRETCH_S,
) -> tuple[float, float, float] | None:
    """(stall seconds, from, to) of the stretch of about ``stretch_s`` inside ``[start, end]``
    where the node waited longest; None without two samples in the window. A counter that
    went down (the node's container started again: a new cgroup) starts a new run."""
    inside = [(t, v) for t, v in points if start <= t <= end]
    runs: list[list[tuple[float, float]]] = [[]]
    for point in inside:
        if runs[-1] and point[1] < runs[-1][-1][1]:
            runs.append([])
        runs[-1].append(point)
    candidates: list[tuple[float, float, float]] = []
    for run in (r for r in runs if len(r) >= 2):
        if run[-1][0] - run[0][0] < stretch_s:  # shorter than a stretch: judged whole
            candidates.append((run[-1][1] - run[0][1], run[0][0], run[-1][0]))
            continue
        for i, (t0, v0) in enumerate(run):
            j = next((k for k in range(i + 1, len(run)) if run[k][0] - t0 >= stretch_s), None)
            if j is None:
                break
            candidates.append((run[j][1] - v0, t0, run[j][0]))
    return max(candidates, key=_fraction, default=None)


def _fraction(found: tuple[float, float, float]) -> float:
    stalled, a, b = found
    return stalled / (b - a) if b > a else 0.0


def stalls(
    events: Iterable[Event],
    start: float,
    end: float,
    nodes: Iterable[str] | None = None,
    stretch_s: float = STRETCH_S,
) -> list[Stall]:
    """Each node's worst stretch of about ``stretch_s`` inside ``[start, end]``, worst first
    (``nodes``: only those; default every node sampled)."""
    chosen = set(nodes) if nodes is not None else None
    found = []
    for node, points in series(events).items():
        if chosen is not None and node not in chosen:
            continue
        worst = worst_stretch(points, start, end, stretch_s)
        if worst is not None:
            found.append(Stall(node, worst[0], worst[1], worst[2], (start, end)))
    return sorted(found, key=lambda s: s.fraction, reverse=True)


def boot_stall(
    events: Sequence[Event], start: float, end: float, nodes: Iterable[str]
) -> Stall | None:
    """The worst of ``nodes``' stretches of :data:`BOOT_STRETCH_S` while they booted
    (``[start, end]``): the stall that makes a boot that timed out *too busy to boot*
    (inconclusive) when it is :func:`material`, rather than broken."""
    found = stalls(events, start - PERIOD_S, end + PERIOD_S, nodes, BOOT_STRETCH_S)
    return replace(found[0], window=(start, end)) if found else None


def material(stall: Stall | None, threshold: float = STALLED_FRACTION) -> bool:
    """Whether ``stall`` makes its window inconclusive."""
    return stall is not None and stall.fraction >= threshold
