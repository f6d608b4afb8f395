"""Node deaths: declared within the health-check band, and final once declared.

Two witnesses with different lags: the workload polls ``ray.nodes()`` every 0.1 s (held
against the band by :func:`dead_in_band`), the observer samples the State API through the
dashboard, seconds late on a loaded host (evidence of the death, recorded by
:func:`await_dead`, never held against the band).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.check.windows import WithHistory, node_dead_event, since
from chaos.errors import CheckFailed, ObserverGap
from chaos.history import Kind, Source
from chaos.observer.gaps import observed
from chaos.steps import step
from chaos.waits import wait_until

if TYPE_CHECKING:
    from chaos.experiment import Experiment
    from chaos.nemesis import Fault

#: ``ray.nodes()`` reports ``DeathReason`` as the int of Ray's ``NodeDeathInfo.Reason`` enum
#: (0 while alive); the State API and actor death causes spell the names.
DEATH_REASON = {1: "EXPECTED_TERMINATION", 2: "UNEXPECTED_TERMINATION"}
#: The GCS's death message for a node that failed its health checks.
MISSED_HEARTBEATS = "health check failed due to missing too many heartbeats"


def await_dead(experiment: Experiment, fault: Fault, node_id: str, label: str) -> float:
    """Wait until the observer sees ``node_id`` DEAD; measure and return fault → DEAD (s).

    Evidence that the GCS declared the node dead, not a timing to hold against the band: the
    observer samples the State API through the dashboard, which lagged the GCS by up to 5.5 s
    on this loaded host (NODE-02: ``ray.nodes()`` 3.2 s, observer 8.7 s). Compare the band
    with :func:`dead_in_band` and the workload's own ``ray.nodes()`` poll (every 0.1 s).
    """
    band = experiment.node_death_band()
    observer = experiment.observer

    def dead() -> None:
        if observer.failure is not None:  # not an AssertionError: the wait ends here
            raise ObserverGap(f"{label}: the observer gave up: {observer.failure}")
        state = observer.latest_nodes().get(node_id, {})
        if state.get("state") != "DEAD":
            raise CheckFailed(f"{label}: node is {state.get('state')}")

    with step(f"check: {label}: the GCS declares node {node_id[:8]} DEAD (State API)"):
        try:
            wait_until(dead, band.high + 30, f"{label}: node {node_id[:8]} DEAD")
        except AssertionError:
            # Never seen DEAD is a verdict only if the observer was looking all along.
            observed(experiment.history, fault.injected_at, label)
            raise
        seen = node_dead_event(experiment.history, node_id, after=fault.injected_at)
        if seen is None:
            raise CheckFailed(f"{label}: the observer never recorded {node_id[:8]} DEAD")
        window = round(seen.t - fault.injected_at, 2)
        experiment.measure(f"{label} → node DEAD, observer (s)", window)
    return window


def dead_in_band(
    experiment: Experiment, fault: Fault, t_dead_seen: float | None, label: str
) -> float:
    """Assert the workload saw the node dead (``ray.nodes()``) within the health-check band."""
    band = experiment.node_death_band()
    with step(f"check: {label}: node DEAD in ray.nodes() within {band}"):
        experiment.measure("health-check band", str(band))
        window = experiment.measure(
            f"{label} → node DEAD, ray.nodes() (s)",
            since(fault, t_dead_seen),
            band=band,
            start=fault.injected_at,
        )
        if window not in band:
            raise CheckFailed(f"{label}: node DEAD {window} s after the strike, outside {band}")
    return float(window)


def stays_dead(
    experiment: WithHistory,
    node_id: str,
    since_t: float,
    label: str,
    *,
    until: float | None = None,
) -> list[Any]:
    """Assert the observer saw ``node_id`` DEAD after ``since_t`` and never ALIVE after that.

    ALIVE before DEAD is detection time (and an observer whose first answer from the State API
    came late records every node ALIVE then: CI saw that 0.01 s after a cut); ALIVE after DEAD
    would be a comeback. "Never ALIVE" holds only for what the observer saw: up to a sample
    taken at or after ``until`` (default: now, waited for), without a gap from ``since_t``
    (:func:`~chaos.observer.gaps.observed`). A gap makes it inconclusive
    (:class:`~chaos.errors.ObserverGap`) unless a comeback was seen anyway. Returns the states
    seen, oldest first.
    """

    def seen() -> list[Any]:
        states = [
            e.get("state")
            for e in experiment.history.events(Kind.NODE_STATE, source=Source.OBSERVER)
            if e.get("node_id") == node_id and e.t > since_t
        ]
        if "DEAD" in states and "ALIVE" in states[states.index("DEAD") :]:
            raise CheckFailed(f"{label}: {node_id[:8]} went {states}")
        return states

    with step(f"check: {label}: node {node_id[:8]} stays DEAD"):
        seen()  # a comeback already seen fails at once, whatever the observer missed
        try:
            observed(experiment.history, since_t, label, until=until)
        except ObserverGap:
            seen()
            raise
        states = seen()
        if "DEAD" not in states:
            raise CheckFailed(f"{label}: the observer never saw {node_id[:8]} DEAD: {states}")
    return states
