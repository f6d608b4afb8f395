"""Recovery windows measured from the history, and the bands Ray's knobs imply.

A window is (fault inject → outcome event), in seconds of wall-clock time; an experiment
compares it with the band derived from the knobs in effect, never with a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chaos.observer.history import Event, History

#: Ray's defaults (read off the 2.59/2.60 sources; CLAIMS.md, "Facts every experiment…").
HEALTH_CHECK_DEFAULTS = {
    "health_check_initial_delay_ms": 5000,
    "health_check_period_ms": 3000,
    "health_check_timeout_ms": 10000,
    "health_check_failure_threshold": 5,
}
#: The observer's own lag: State API staleness (~1 s) plus a sampling period on an idle host;
#: up to 5.5 s was measured with four clusters booting on two cores, hence 6 s.
OBSERVER_SLACK_S = 6.0


@dataclass(frozen=True)
class Band:
    low: float
    high: float
    why: str

    def __contains__(self, seconds: float) -> bool:
        return self.low <= seconds <= self.high

    def __str__(self) -> str:
        return f"[{self.low:.1f} s, {self.high:.1f} s] ({self.why})"


def knob(knobs: Mapping[str, str], name: str) -> int:
    return int(knobs.get(f"RAY_{name}", HEALTH_CHECK_DEFAULTS[name]))


def node_death_band(knobs: Mapping[str, str]) -> Band:
    """When the GCS marks a dead node DEAD: ``threshold`` failed checks, one per period.

    Fastest: the checks already under way fail at once, (threshold-1) periods. Slowest: every
    check waits out its timeout; plus the observer's slack.
    """
    period = knob(knobs, "health_check_period_ms") / 1000
    timeout = knob(knobs, "health_check_timeout_ms") / 1000
    threshold = knob(knobs, "health_check_failure_threshold")
    low = max(0.0, (threshold - 1) * period - period)
    high = threshold * (period + timeout) + OBSERVER_SLACK_S
    return Band(low, high, f"period {period:g} s, timeout {timeout:g} s, threshold {threshold}")


def first(history: History, match: Callable[[Event], bool], after: float) -> Event | None:
    for event in history.events():
        if event.t >= after and match(event):
            return event
    return None


def injected(history: History, fault: str, target: str | None = None) -> Event:
    for event in history.events("inject", source="nemesis"):
        if event.get("fault") == fault and (target is None or event.get("target") == target):
            return event
    raise LookupError(f"no {fault} fault on {target or 'any target'} in the history")


def fault_to_node_dead(history: History, fault: Event, node_id: str) -> float | None:
    """Seconds from ``fault`` until the GCS marked ``node_id`` DEAD (None: never seen DEAD).

    The GCS's own time of death (``end_time_ms``, the host's clock) where the observer's row
    carries it, else the time the observer saw it: a sample lags the GCS by the period plus
    the dashboard's latency, seconds on a loaded host (CI: 12.2 s seen for a death in band).
    """
    dead = first(
        history,
        lambda e: (
            e.kind == "node_state" and e.get("node_id") == node_id and e.get("state") == "DEAD"
        ),
        after=fault.t,
    )
    if dead is None:
        return None
    end_ms = dead.get("end_time_ms")
    at = end_ms / 1000 if isinstance(end_ms, int | float) and end_ms > 0 else dead.t
    return at - fault.t


def fault_to_event(
    history: History, fault: Event, kind: str, where: Callable[[Event], bool] | None = None
) -> float | None:
    """Seconds from ``fault`` until the first later event of ``kind`` (None: never)."""
    hit = first(history, lambda e: e.kind == kind and (where is None or where(e)), fault.t)
    return None if hit is None else hit.t - fault.t


def fault_to_actor_alive(history: History, fault: Event, actor_id: str) -> float | None:
    return fault_to_event(
        history,
        fault,
        "actor_state",
        lambda e: e.get("actor_id") == actor_id and e.get("state") == "ALIVE",
    )


def unobservable_window(history: History, after: float) -> float | None:
    """Seconds the State API was unobservable (GCS down → back), first outage after ``after``."""
    down = first(history, lambda e: e.kind == "unobservable", after)
    if down is None:
        return None
    back = first(history, lambda e: e.kind == "observable", down.t)
    return None if back is None else back.t - down.t
