"""Node and raylet failures (docs: fault_tolerance/nodes): NODE-01 … NODE-04.

Knobs shortened: health checks (FAST_HEALTH_CHECKS), so a dead node is DEAD in seconds.
Workloads: ``workloads.nodes`` — a long task (``max_retries=0``) and an actor
(``max_restarts=0``) pinned to the victim; the workload polls ``ray.nodes()`` for the death and
reports the GCS's death record and the State API's node row.
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.check import (
    DEATH_REASON,
    FAST_HEALTH_CHECKS,
    KILL_NODE,
    KILL_RAYLET,
    MISSED_HEARTBEATS,
    STOP_RAY,
    applies,
    attempts,
    await_dead,
    dead_in_band,
    death_cause,
    logged_at,
    since,
    stays_dead,
    strike_on,
)
from chaos.experiment import Experiment
from chaos.nemesis import Fault, Nemesis
from chaos.workload.run import WorkloadRun

WORKERS_2 = [{"name": "worker", "count": 2, "num_cpus": 1}]
WORKERS_3 = [{"name": "worker", "count": 3, "num_cpus": 1}]
#: The line the GCS pushes to drivers when a node misses its heartbeats.
PUSHED = "has been marked dead because the detector has missed too many heartbeats"


def check_work_failed(
    experiment: Experiment, fault: Fault, seen: dict[str, Any], label: str
) -> None:
    """The node's task got NodeDiedError, its actor ActorDiedError (cause NODE_DIED)."""
    assert seen["task_error"] is not None and seen["task_error"]["type"] == "NodeDiedError", seen
    assert attempts(seen["task_attempts"]) == [["FAILED", "NODE_DIED"]], seen["task_attempts"]
    errors = [e["type"] for e in seen["actor_errors"]]
    assert errors[-1] == "ActorDiedError", errors
    assert set(errors[:-1]) <= {"GetTimeoutError", "ActorUnavailableError"}, errors
    assert death_cause(seen["actor_state_api"]).get("reason") == "NODE_DIED"
    experiment.measure(f"{label} → task NodeDiedError (s)", since(fault, seen["t_task_outcome"]))
    experiment.measure(f"{label} → actor ActorDiedError (s)", since(fault, seen["t_actor_final"]))


def check_record(seen: dict[str, Any], reason: str, message: str, version: str) -> None:
    """``ray.nodes()`` death record (expectations: ray_nodes_death_record) and the State
    API's node row."""
    assert seen["dead"], "the workload never saw the node dead"
    record = seen["ray_nodes_record"]
    assert record["Alive"] is False, record
    if applies("ray_nodes_death_record", version):
        assert DEATH_REASON.get(record["DeathReason"]) == reason, record
        assert record["DeathReasonMessage"] == message, record
    state = seen["state_api_node"]
    assert state["state"] == "DEAD", state
    prefix = "Unexpected" if reason == "UNEXPECTED_TERMINATION" else "Expected"
    assert state["state_message"] == f"{prefix} termination: {message}", state


def pushed(run: WorkloadRun, ip: str) -> list[str]:
    """Driver output lines carrying the GCS's "marked dead" error for the node at ``ip``."""
    return [line for line in run.stream.output if PUSHED in line and ip in line]


@pytest.mark.claim("NODE-01", "NODE-02", "NODE-04")
@pytest.mark.needs_tools("ps", "kill")  # the raylet is killed by PID
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_killed_node_killed_raylet_and_graceful_stop(experiment: Experiment) -> None:
    """A killed container (NODE-01) and a killed raylet (NODE-02) are node failures: work
    fails, DEAD within the band, UNEXPECTED_TERMINATION, an error pushed to the driver. ``ray
    stop`` (NODE-04) is EXPECTED_TERMINATION with no error pushed."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    version = experiment.ray_version

    for claim, name, how, strike in (
        ("NODE-01", "worker-1", "node", KILL_NODE),
        ("NODE-02", "worker-2", "raylet", KILL_RAYLET),
    ):
        node = cluster.node(name)
        run = cluster.run("workloads.nodes:node_death", on=name, timeout=300)
        fault, busy = strike_on(experiment, run, "node_busy", strike)
        assert busy.get("node_id") == node.node_id
        seen = run.result(timeout=240)
        check_record(seen, "UNEXPECTED_TERMINATION", MISSED_HEARTBEATS, version)
        check_work_failed(experiment, fault, seen, f"{claim} {how} kill")
        dead_in_band(experiment, fault, seen["t_dead_seen"], f"{claim} {how} kill")
        await_dead(experiment, fault, str(node.node_id), f"{claim} {how} kill")
        assert pushed(run, node.ip), f"no 'marked dead' error pushed: {run.stream.tail(10)}"

    node = cluster.node("worker-3")
    run = cluster.run("workloads.nodes:node_death", on="worker-3", timeout=300)
    fault, busy = strike_on(experiment, run, "node_busy", STOP_RAY)
    seen = run.result(timeout=240)
    check_record(seen, "EXPECTED_TERMINATION", "received SIGTERM", version)
    check_work_failed(experiment, fault, seen, "NODE-04 ray stop")
    experiment.measure(
        "NODE-04 ray stop → DEAD, ray.nodes() (s)", since(fault, seen["t_dead_seen"])
    )
    # The raylet unregisters itself: no health-check wait. Timed on Ray's own clocks (the
    # raylet's log line, the GCS's end time), because `ray stop` itself needs seconds to start
    # on a loaded host (CI: DEAD 14.2 s after the strike; 0.8 s on an idle one).
    sigterm = logged_at(cluster, "worker-3", "received SIGTERM")
    dead = experiment.measure(
        "NODE-04 raylet got SIGTERM → GCS end time (s)",
        round(seen["state_api_node"]["end_time_ms"] / 1000 - sigterm, 3),
    )
    assert -0.01 <= dead < band.high, f"GCS end time {dead} s after the raylet's SIGTERM"
    await_dead(experiment, fault, str(node.node_id), "NODE-04 ray stop")
    assert not pushed(run, node.ip), f"a graceful stop pushed an error: {pushed(run, node.ip)}"


@pytest.mark.needs_tools("ps", "kill")  # worker-2's raylet is killed by PID
@pytest.mark.claim("NODE-03")
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_2)
def test_restarted_node_joins_under_a_new_id(experiment: Experiment) -> None:
    """A node (container killed) or a raylet (killed) started again on the same host and IP
    registers a new node id; the old id stays DEAD."""
    cluster = experiment.cluster
    band = experiment.node_death_band()

    for name, kill, strike_node in (
        ("worker-1", "node", Nemesis.kill_node),
        ("worker-2", "raylet", Nemesis.kill_raylet),
    ):
        node = cluster.node(name)
        old = str(node.node_id)
        run = cluster.run("workloads.nodes:node_rejoins", on=name, timeout=300)
        known = run.wait_for("node_known", timeout=120)[0]
        assert known.get("node_id") == old and known.get("ip") == node.ip
        fault = strike_node(experiment.nemesis, name)
        dead = run.wait_for("old_node_dead", timeout=band.high + 30)[0]
        dead_in_band(experiment, fault, dead.get("t_dead_seen"), f"NODE-03 {kill} kill")
        await_dead(experiment, fault, old, f"NODE-03 {kill} kill")
        restart = experiment.nemesis.restart_node(name)  # waits until the new id is ALIVE
        seen = run.result(timeout=240)
        new = cluster.node(name).node_id
        assert new and new != old, "the restarted node must have a new id"
        assert seen["old_node_id"] == old and seen["new_node_id"] == new, seen
        assert not seen["same_id"] and cluster.node(name).ip == seen["ip"], seen
        assert seen["old_record"]["Alive"] is False, seen["old_record"]
        assert seen["state_api_old"]["state"] == "DEAD", seen["state_api_old"]
        assert seen["state_api_new"]["state"] == "ALIVE", seen["state_api_new"]
        assert seen.get("task_on_new") is True, f"a task pinned to the new id must run: {seen}"
        experiment.measure(
            f"NODE-03 {kill}: restart → new id ALIVE (s)", since(restart, seen["t_new_alive_seen"])
        )
        stays_dead(experiment, str(old), fault.injected_at, f"NODE-03 {kill}: the old id")
