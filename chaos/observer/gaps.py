"""Whether the observer saw a window whole: a fresh sample at its end and no gap inside.

The observer only reports transitions, so "the last state recorded" alone cannot tell a node
that stayed ALIVE from an observer that stopped looking. Its agent therefore emits
``sampled`` after a State API sample that answered (at most once per ``heartbeat_s``), stamped
inside the cluster, and states its sampling in ``observer_started``: a history alone says how
far apart two samples of a working observer can be (:attr:`Sampling.max_gap_s`). A longer
stretch without one is a gap; a check that judges a window with a gap is inconclusive
(:class:`~chaos.errors.ObserverGap`, Allure: broken), never passed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import pairwise

from chaos.errors import ObserverGap
from chaos.history import Event, History, Kind, Source

SOURCE = Source.OBSERVER
#: One heartbeat per this many sampling periods: dense enough to bound gaps to about a second
#: at the default period, sparse enough not to flood the history.
HEARTBEAT_PERIODS = 2
#: Seconds each State API query may take before the sample counts as failed (the agent's
#: ``--query-timeout``).
QUERY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Sampling:
    """The observer's sampling in effect, as its ``observer_started`` event states it."""

    period_s: float
    #: At most one ``sampled`` heartbeat per this many seconds.
    heartbeat_s: float
    #: Queries per sample: nodes, and actors and placement groups when asked for.
    queries: int = 3
    query_timeout_s: float = QUERY_TIMEOUT_S

    @classmethod
    def every(cls, period_s: float, queries: int = 3) -> Sampling:
        """The sampling of an observer with period ``period_s`` (heartbeats derived from it)."""
        return cls(period_s, HEARTBEAT_PERIODS * period_s, queries)

    @property
    def max_gap_s(self) -> float:
        """How far apart two heartbeats of an observer whose every sample answers can be: a
        heartbeat interval, then a sample whose every query took its whole timeout, then the
        pause of one period."""
        return self.heartbeat_s + self.queries * self.query_timeout_s + self.period_s

    @classmethod
    def of(cls, history: History) -> Sampling | None:
        """The sampling of the observer's latest start in ``history`` (None: it never started)."""
        started = history.events(Kind.OBSERVER_STARTED, source=SOURCE)
        if not started:
            return None
        last = started[-1]
        period = float(last.get("period", 0.25))
        return cls(
            period_s=period,
            heartbeat_s=float(last.get("heartbeat", HEARTBEAT_PERIODS * period)),
            queries=int(last.get("queries", 3)),
            query_timeout_s=float(last.get("query_timeout", QUERY_TIMEOUT_S)),
        )


@dataclass(frozen=True)
class Gap:
    """A stretch of a judged window without a sample that answered."""

    start: float
    end: float
    #: The observer said the State API failed inside it (``unobservable``) and kept running:
    #: an outage it saw (a GCS or head down), not an observer that fell silent.
    reported: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def __str__(self) -> str:
        why = "the State API did not answer" if self.reported else "the observer was silent"
        return f"{self.seconds:.1f} s without a sample from t={self.start:.2f} ({why})"


def samples(history: History) -> list[float]:
    """Times of the observer's samples that answered (its heartbeats), oldest first."""
    return [e.t for e in history.events(Kind.SAMPLED, source=SOURCE)]


def gaps(history: History, start: float, end: float, bound: float) -> list[Gap]:
    """Stretches of ``[start, end]`` longer than ``bound`` without a sample (the window's
    edges count as edges of a stretch: a window must open and close near a sample)."""
    edges = [start, *(t for t in samples(history) if start < t < end), end]
    observer = history.events(source=SOURCE)
    found = []
    for a, b in pairwise(edges):
        if b - a > bound:
            inside = [e for e in observer if a <= e.t <= b]
            ended = any(e.kind == Kind.EXEC_ENDED for e in inside)
            seen = any(e.kind == Kind.UNOBSERVABLE for e in inside)
            found.append(Gap(a, b, reported=seen and not ended))
    return found


def _gave_up(history: History) -> Event | None:
    failed = history.events(Kind.OBSERVER_FAILED, source=SOURCE)
    return failed[-1] if failed else None


def observed(
    history: History,
    start: float,
    what: str,
    *,
    outages_ok: bool = False,
    until: float | None = None,
) -> float:
    """The time of the observer's first sample at or after ``until`` (default: now, waiting
    for it), once it is sure the observer saw ``[start, until]`` whole; else
    :class:`~chaos.errors.ObserverGap` naming ``what`` was being judged.

    ``outages_ok``: stretches in which the observer kept running and reported the State API
    down are not gaps (INV-02: the GCS keeps dead nodes in its table across an outage, so the
    first sample after it shows a death that happened during it).
    """
    if (failed := _gave_up(history)) is not None:
        raise ObserverGap(f"{what}: the observer gave up: {failed.get('error')}")
    sampling = Sampling.of(history)
    if sampling is None:
        raise ObserverGap(f"{what}: the observer never started")
    until = time.time() if until is None else until
    # Arrival may lag the stamp (the stream out of the node): wait twice the bound, judge by
    # the stamps.
    fresh = history.await_event(
        lambda e: e.kind == Kind.SAMPLED and e.source == SOURCE and e.t >= until,
        timeout=2 * sampling.max_gap_s,
    )
    if (failed := _gave_up(history)) is not None:
        raise ObserverGap(f"{what}: the observer gave up: {failed.get('error')}")
    end = fresh.t if fresh is not None else time.time()
    holes = [
        g for g in gaps(history, start, end, sampling.max_gap_s) if not (outages_ok and g.reported)
    ]
    if fresh is None or holes:
        late = [] if fresh else [f"no sample stamped after t={until:.2f} arrived"]
        said = "; ".join([*map(str, holes), *late])
        raise ObserverGap(
            f"{what}: the observer did not see the window whole (a sample at least every "
            f"{sampling.max_gap_s:.1f} s at a period of {sampling.period_s} s): {said}",
            hint="the check is inconclusive; see the history's sampled and unobservable events",
        )
    return fresh.t
