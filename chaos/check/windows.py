"""Windows measured from the history: seconds from a fault to what it caused.

A window runs from the nemesis's ``inject`` event (or a :class:`~chaos.nemesis.Fault`'s
``injected_at``) to an outcome: a node DEAD, an actor ALIVE again, a time the workload
reported. Everything here only reads a :class:`~chaos.history.History`, so it works
on a live experiment and on a history replayed in a unit test alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from chaos.errors import CheckFailed
from chaos.history import Event, History, Kind, Source

if TYPE_CHECKING:
    from chaos.nemesis import Fault


class WithHistory(Protocol):
    """What the history checks need: an experiment, or any stand-in that carries a history."""

    @property
    def history(self) -> History: ...


def first(history: History, match: Callable[[Event], bool], after: float) -> Event | None:
    """The earliest event at or after ``after`` that ``match`` accepts."""
    for event in history.events():
        if event.t >= after and match(event):
            return event
    return None


def injected(history: History, fault: str, target: str | None = None) -> Event:
    """The nemesis's first ``inject`` event of kind ``fault`` (on ``target``, if given)."""
    for event in history.events(Kind.INJECT, source=Source.NEMESIS):
        if event.get("fault") == fault and (target is None or event.get("target") == target):
            return event
    raise LookupError(f"no {fault} fault on {target or 'any target'} in the history")


def since(fault: Fault, t: float | None) -> float:
    """Seconds from the strike to the wall-clock time ``t`` a workload reported."""
    if t is None:
        raise CheckFailed("the workload did not report the time")
    return round(float(t) - fault.injected_at, 2)


def node_dead_event(history: History, node_id: str, after: float) -> Event | None:
    """The observer's first row showing ``node_id`` DEAD at or after ``after``."""
    return first(
        history,
        lambda e: (
            e.kind == Kind.NODE_STATE and e.get("node_id") == node_id and e.get("state") == "DEAD"
        ),
        after=after,
    )


def fault_to_node_dead(history: History, fault: Event, node_id: str) -> float | None:
    """Seconds from ``fault`` until the GCS marked ``node_id`` DEAD (None: never seen DEAD).

    The GCS's own time of death (``end_time_ms``, the host's clock) where the observer's row
    carries it, else the time the observer saw it: a sample lags the GCS by the period plus
    the dashboard's latency, seconds on a loaded host (CI: 12.2 s seen for a death in band).
    """
    dead = node_dead_event(history, node_id, fault.t)
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
    """Seconds from ``fault`` until the observer saw ``actor_id`` ALIVE (None: never)."""
    return fault_to_event(
        history,
        fault,
        Kind.ACTOR_STATE,
        lambda e: e.get("actor_id") == actor_id and e.get("state") == "ALIVE",
    )


def unobservable_window(history: History, after: float) -> float | None:
    """Seconds the State API was unobservable (GCS down → back), first outage after ``after``."""
    down = first(history, lambda e: e.kind == Kind.UNOBSERVABLE, after)
    if down is None:
        return None
    back = first(history, lambda e: e.kind == Kind.OBSERVABLE, down.t)
    return None if back is None else back.t - down.t
