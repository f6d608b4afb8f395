"""Strikes keyed on workload events, and the windows they open.

Shared by the node-level experiments (test_tasks, test_objects, test_actors, test_nodes). The
workloads in ``workloads.{tasks,objects,actors,nodes}`` emit one event naming what to strike
(``node_name``, and ``pid`` for a process) and then detect the consequences themselves; these
helpers strike through the nemesis (so the fault is verified and INV-02 knows the victim) and
measure the windows against the health-check band of the knobs in effect.
"""

from __future__ import annotations

import shlex
from typing import Any

from chaos.check.bands import first
from chaos.cluster.cluster import RAY_LOGS, Cluster
from chaos.experiment import Experiment
from chaos.nemesis.nemesis import Fault
from chaos.observer.history import Event
from chaos.waits import wait_until
from chaos.workload.run import WorkloadRun

#: ``ray.nodes()`` reports ``DeathReason`` as the int of Ray's ``NodeDeathInfo.Reason`` enum
#: (0 while alive); the State API and actor death causes spell the names.
DEATH_REASON = {1: "EXPECTED_TERMINATION", 2: "UNEXPECTED_TERMINATION"}
MISSED_HEARTBEATS = "health check failed due to missing too many heartbeats"


def at_least(version: str, floor: str) -> bool:
    """``version`` >= ``floor`` for Ray release strings such as '2.59.0'."""

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split(".")[:3])

    return parts(version) >= parts(floor)


def strike_on(
    experiment: Experiment,
    run: WorkloadRun,
    kind: str,
    how: str = "node",
    *,
    count: int = 1,
    timeout: float = 180.0,
) -> tuple[Fault, Event]:
    """Wait for the ``count``-th ``kind`` event of ``run`` and strike what it names.

    ``how``: "node" (SIGKILL the container), "raylet" (SIGKILL the raylet only), "stop" (``ray
    stop``, SIGTERM) or "pid" (SIGKILL the process ``pid`` on ``node_name``).
    """
    event = run.wait_for(kind, count=count, timeout=timeout)[-1]
    name = event.get("node_name")
    assert name, f"the workload's {kind} event names no node: {event.fields}"
    nemesis = experiment.nemesis
    if how == "node":
        fault = nemesis.kill_node(name)
    elif how == "raylet":
        fault = nemesis.kill_raylet(name)
    elif how == "stop":
        fault = nemesis.stop_node(name)
    elif how == "pid":
        fault = nemesis.kill_worker(name, int(event.get("pid")))
    else:
        raise ValueError(f"unknown strike {how!r}")
    return fault, event


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

    wait_until(dead, band.high + 30, f"{label}: node {node_id[:8]} DEAD")
    seen = first(
        experiment.history,
        lambda e: (
            e.kind == "node_state" and e.get("node_id") == node_id and e.get("state") == "DEAD"
        ),
        after=fault.injected_at,
    )
    assert seen is not None, f"{label}: the observer never recorded {node_id[:8]} DEAD"
    window = round(seen.t - fault.injected_at, 2)
    experiment.measure(f"{label} → node DEAD, observer (s)", window)
    return window


def dead_in_band(
    experiment: Experiment, fault: Fault, t_dead_seen: float | None, label: str
) -> float:
    """Assert the workload saw the node dead (``ray.nodes()``) within the health-check band."""
    band = experiment.node_death_band()
    experiment.measure("health-check band", str(band))
    window = experiment.measure(f"{label} → node DEAD, ray.nodes() (s)", since(fault, t_dead_seen))
    assert window in band, f"{label}: node DEAD {window} s after the strike, outside {band}"
    return float(window)


def since(fault: Fault, t: float | None) -> float:
    """Seconds from the strike to the wall-clock time ``t`` a workload reported."""
    assert t is not None, "the workload did not report the time"
    return round(float(t) - fault.injected_at, 2)


def logged_at(cluster: Cluster, node: str, needle: str, log: str = "raylet.out") -> float:
    """Wall-clock time of the first line of ``log`` on ``node`` that contains ``needle``.

    Ray stamps its C++ log lines in the container's local time (``[2026-12-02 17:23:51,744 I
    …``), so the container's own ``date`` converts the stamp.
    """
    script = (
        f"line=$(grep -m1 -h -F -e {shlex.quote(needle)} {RAY_LOGS}/{log}) || exit 3; "
        'date -d "$(printf %s "$line" | cut -c2-24 | tr , .)" +%s.%N'
    )
    out = cluster.exec(node, ["sh", "-c", script], timeout=30)
    assert out.exit_code == 0, f"{node}:{log} has no {needle!r} line: {out.output[-300:]}"
    return float(out.output.strip())


def attempts(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """State API task attempts as ``[state, error_type]``, oldest first."""
    return [[r.get("state"), r.get("error_type")] for r in rows]


def death_cause(row: dict[str, Any] | None) -> dict[str, Any]:
    """``death_cause.actor_died_error_context`` of a State API actor row."""
    assert row is not None, "the State API has no row for the actor"
    cause = row.get("death_cause") or {}
    assert isinstance(cause, dict), f"unexpected death_cause {cause!r}"
    return dict(cause.get("actor_died_error_context") or {})


def actor_states(experiment: Experiment, actor_id: str) -> list[tuple[Any, Any]]:
    """The observer's ``(state, num_restarts)`` transitions of one actor, oldest first."""
    seen: list[tuple[Any, Any]] = []
    for e in experiment.history.events("actor_state", source="observer"):
        if e.get("actor_id") == actor_id:
            key = (e.get("state"), e.get("num_restarts"))
            if not seen or seen[-1] != key:
                seen.append(key)
    return seen


def stays_dead(experiment: Experiment, node_id: str, since_t: float, label: str) -> list[Any]:
    """Assert the observer saw ``node_id`` DEAD after ``since_t`` and never ALIVE after that.

    ALIVE before DEAD is detection time (and an observer whose first answer from the State API
    came late records every node ALIVE then: CI saw that 0.01 s after a cut); ALIVE after DEAD
    would be a comeback. Returns the states seen, oldest first.
    """
    states = [
        e.get("state")
        for e in experiment.history.events("node_state", source="observer")
        if e.get("node_id") == node_id and e.t > since_t
    ]
    assert "DEAD" in states, f"{label}: the observer never saw {node_id[:8]} DEAD: {states}"
    assert "ALIVE" not in states[states.index("DEAD") :], f"{label}: {node_id[:8]} went {states}"
    return states
