"""Whether the host was too busy to judge a window: a pure verdict over the history.

A chaos verdict is a statement about Ray only if Ray's processes were scheduled. When the
nodes a window depends on spent a material part of it with every runnable process waiting
for a CPU (their cgroups' pressure stall information, ``full``, sampled each second into
``cpu_stall`` events by :class:`chaos.cluster.stalls.StallSampler`), the verdict is
*inconclusive*: neither passed nor failed, and never a reason to widen the window (Jepsen's
``:valid? :unknown``).

The windows (:func:`judged_windows`) are the ones the body held against a band and, for a
body that failed, the stretch from its last strike to the failure: a pass that judged no
timing is not voided by a stall (the churn experiment's nodes starve each other on two cores,
and a value that came back exactly is no less exact for it). Material means: in some stretch
of :data:`STRETCH_S` seconds inside a window, a node's processes all waited for a CPU at least
:data:`STALLED_FRACTION` of the time. The stretch is the
scale of Ray's own clocks that the experiments judge (health checks: 1 s period, 3 s timeout,
3 failures with ``FAST_HEALTH_CHECKS``), so a starved raylet that missed its checks shows,
while seconds of contention averaged over a long window do not hide it. Only a measured
stall makes a verdict inconclusive, never a timeout alone: with no samples (an engine not on
this host) nothing is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import pairwise

from chaos.cluster.stall_stretches import (
    BOOT_STRETCH_S,
    STALLED_FRACTION,
    STRETCH_S,
    Stall,
    boot_stall,
    material,
    series,
    stalls,
    worst_stretch,
)
from chaos.cluster.stalls import PERIOD_S
from chaos.history import Event, Kind

__all__ = [
    "BOOT_STRETCH_S",
    "STALLED_FRACTION",
    "STRETCH_S",
    "Silence",
    "Stall",
    "boot_stall",
    "judged_windows",
    "longest_silence",
    "material",
    "series",
    "stall_steps",
    "stalls",
    "worst_in",
    "worst_stretch",
]


def judged_windows(
    events: Sequence[Event], began: float, now: float, *, failed: bool
) -> list[tuple[float, float]]:
    """The windows a body's verdict rests on: each measurement it held against a band, from
    the window's opening (``start``) to its close (``end``, the moment measured, as a verdict
    function records it; else when it was measured); and, for a body that failed,
    from its last strike (else its start) to ``now``. A body that passed without a banded
    window judged no timing, so no stall can void it."""
    found = [
        (float(e.get("start")), float(e.get("end") or e.t))
        for e in events
        if e.kind == Kind.MEASUREMENT and e.get("band") and e.get("start") is not None
        and e.t >= began
    ]  # fmt: skip
    if failed:
        strikes = [e.t for e in events if e.kind == Kind.INJECT and began <= e.t <= now]
        found.append((strikes[-1] if strikes else began, now))
    return found


def worst_in(events: Sequence[Event], windows: Iterable[tuple[float, float]]) -> Stall | None:
    """The worst node's worst stretch over ``windows``, each widened by a sample period on
    both sides (a window shorter than the samples' spacing still holds two)."""
    worst: Stall | None = None
    for start, end in windows:
        found = stalls(events, start - PERIOD_S, end + PERIOD_S)
        if found and (worst is None or found[0].fraction > worst.fraction):
            # The window as judged, not as widened for its samples (the reader sees it).
            worst = replace(found[0], window=(start, end))
    return worst


def stall_steps(events: Sequence[Event]) -> list[tuple[float, float]]:
    """(time, the most stalled node's fraction over the last sample step): the lane the
    timeline draws."""
    per_node = series(events)
    times = sorted({t for points in per_node.values() for t, _ in points})
    lane: list[tuple[float, float]] = []
    for a, b in pairwise(times):
        worst = 0.0
        for points in per_node.values():
            va = next((v for t, v in points if t == a), None)
            vb = next((v for t, v in points if t == b), None)
            if va is not None and vb is not None and vb >= va and b > a:
                worst = max(worst, (vb - va) / (b - a))
        lane.append((b, min(worst, 1.0)))
    return lane


@dataclass(frozen=True)
class Silence:
    """The longest stretch of a judged window without a heartbeat of one watcher."""

    #: Whose heartbeats: the harness's stall sampler (every PERIOD_S, on the host) or the
    #: cluster's observer (its answered State API samples, in the driver container).
    watcher: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict[str, object]:
        at = datetime.fromtimestamp(self.start, UTC).strftime("%H:%M:%S")
        return {"watcher": self.watcher, "seconds": round(self.seconds, 2), "from": f"{at} UTC"}


def longest_silence(
    watcher: str, beats: Iterable[float], windows: Iterable[tuple[float, float]]
) -> Silence | None:
    """The longest stretch inside ``windows`` between two of ``beats`` (a window's edges are
    not beats: a window that opens or closes between two beats counts the whole stretch they
    bound). None without two beats in or around a window — nothing was watching."""
    times = sorted(beats)
    longest: Silence | None = None
    for start, end in windows:
        before = [t for t in times if t <= start][-1:]
        after = [t for t in times if t >= end][:1]
        inside = [*before, *(t for t in times if start < t < end), *after]
        for a, b in pairwise(inside):
            if longest is None or b - a > longest.seconds:
                longest = Silence(watcher, a, b)
    return longest
