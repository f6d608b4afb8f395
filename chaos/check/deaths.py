"""Node deaths: declared within the health-check band, and final once declared.

Two witnesses with different lags: the workload polls ``ray.nodes()`` every 0.1 s (held
against the band by :func:`dead_in_band`), the observer samples the State API through the
dashboard, seconds late on a loaded host (evidence of the death, recorded by
:func:`await_dead`, never held against the band).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.check.windows import WithHistory, node_dead_event, since
from chaos.observer.history import Kind, Source
from chaos.report.steps import step
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

    def dead() -> None:
        state = experiment.observer.latest_nodes().get(node_id, {})
        assert state.get("state") == "DEAD", f"{label}: node is {state.get('state')}"

    with step(f"check: {label}: the GCS declares node {node_id[:8]} DEAD (State API)"):
        wait_until(dead, band.high + 30, f"{label}: node {node_id[:8]} DEAD")
        seen = node_dead_event(experiment.history, node_id, after=fault.injected_at)
        assert seen is not None, f"{label}: the observer never recorded {node_id[:8]} DEAD"
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
        assert window in band, f"{label}: node DEAD {window} s after the strike, outside {band}"
    return float(window)


def stays_dead(experiment: WithHistory, node_id: str, since_t: float, label: str) -> list[Any]:
    """Assert the observer saw ``node_id`` DEAD after ``since_t`` and never ALIVE after that.

    ALIVE before DEAD is detection time (and an observer whose first answer from the State API
    came late records every node ALIVE then: CI saw that 0.01 s after a cut); ALIVE after DEAD
    would be a comeback. Returns the states seen, oldest first.
    """
    with step(f"check: {label}: node {node_id[:8]} stays DEAD"):
        states = [
            e.get("state")
            for e in experiment.history.events(Kind.NODE_STATE, source=Source.OBSERVER)
            if e.get("node_id") == node_id and e.t > since_t
        ]
        assert "DEAD" in states, f"{label}: the observer never saw {node_id[:8]} DEAD: {states}"
        assert "ALIVE" not in states[states.index("DEAD") :], (
            f"{label}: {node_id[:8]} went {states}"
        )
    return states
