"""Node and raylet failures (docs: fault_tolerance/nodes): NODE-01 … NODE-04.

Knobs shortened: health checks (FAST_HEALTH_CHECKS), so a dead node is DEAD in seconds.
Workloads: ``workloads.nodes`` — a long task (``max_retries=0``) and an actor
(``max_restarts=0``) pinned to the victim; the workload polls ``ray.nodes()`` for the death and
reports the GCS's death record and the State API's node row.
"""

from __future__ import annotations

import pytest

from chaos.testing import (
    FAST_HEALTH_CHECKS,
    KILL_NODE,
    KILL_RAYLET,
    STOP_RAY,
    Experiment,
    Nemesis,
    WorkloadError,
    WorkloadRun,
    applies,
    await_dead,
    logged_at,
    stays_dead,
    strike_on,
)

from .verdicts.nodes import (
    NodeStrike,
    Restart,
    graceful_stop,
    killed_node,
    killed_raylet,
    rejoins_under_a_new_id,
)

WORKERS_2 = [{"name": "worker", "count": 2, "num_cpus": 1}]
WORKERS_3 = [{"name": "worker", "count": 3, "num_cpus": 1}]
#: The line the GCS pushes to drivers when a node misses its heartbeats.
PUSHED = "has been marked dead because the detector has missed too many heartbeats"


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

    records = applies("ray_nodes_death_record", version)
    for claim, judge, name, how, strike in (
        ("NODE-01", killed_node, "worker-1", "node", KILL_NODE),
        ("NODE-02", killed_raylet, "worker-2", "raylet", KILL_RAYLET),
    ):
        node = cluster.node(name)
        run = cluster.run("workloads.nodes:node_death", on=name, timeout=300)
        fault, busy = strike_on(experiment, run, "node_busy", strike)
        if busy.get("node_id") != node.node_id:
            raise WorkloadError(f"set-up: the work must run on {name}: {busy}")
        seen = run.result(timeout=240)
        label = f"{claim} {how} kill"
        await_dead(experiment, fault, str(node.node_id), label)
        struck = NodeStrike(label, fault.injected_at, seen, pushed(run, node.ip), records)
        experiment.judge(judge(struck, band))

    node = cluster.node("worker-3")
    run = cluster.run("workloads.nodes:node_death", on="worker-3", timeout=300)
    fault, busy = strike_on(experiment, run, "node_busy", STOP_RAY)
    seen = run.result(timeout=240)
    sigterm = logged_at(cluster, "worker-3", "received SIGTERM")
    await_dead(experiment, fault, str(node.node_id), "NODE-04 ray stop")
    stopped = NodeStrike("NODE-04 ray stop", fault.injected_at, seen, pushed(run, node.ip), records)
    experiment.judge(graceful_stop(stopped, band, sigterm))


@pytest.mark.needs_tools("ps", "kill")  # worker-2's raylet is killed by PID
@pytest.mark.claim("NODE-03")
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_2)
def test_restarted_node_joins_under_a_new_id(experiment: Experiment) -> None:
    """A node (container killed) or a raylet (killed) started again on the same host and IP
    registers a new node id; the old id stays DEAD."""
    cluster = experiment.cluster
    band = experiment.node_death_band()

    restarts = []
    for name, kill, strike_node in (
        ("worker-1", "node", Nemesis.kill_node),
        ("worker-2", "raylet", Nemesis.kill_raylet),
    ):
        node = cluster.node(name)
        old = str(node.node_id)
        run = cluster.run("workloads.nodes:node_rejoins", on=name, timeout=300)
        known = run.wait_for("node_known", timeout=120)[0]
        if known.get("node_id") != old or known.get("ip") != node.ip:
            raise WorkloadError(f"set-up: the workload must know {name} as {old}: {known.fields}")
        fault = strike_node(experiment.nemesis, name)
        dead = run.wait_for("old_node_dead", timeout=band.high + 30)[0]
        await_dead(experiment, fault, old, f"NODE-03 {kill} kill")
        restart = experiment.nemesis.restart_node(name)  # waits until the new id is ALIVE
        seen = run.result(timeout=240)
        stays_dead(experiment, old, fault.injected_at, f"NODE-03 {kill}: the old id")
        rejoined = cluster.node(name)
        restarts.append(
            Restart(
                how=kill,
                killed_at=fault.injected_at,
                dead_seen=dead.get("t_dead_seen"),
                restarted_at=restart.injected_at,
                old_id=old,
                new_id=rejoined.node_id,
                ip=rejoined.ip,
                seen=seen,
            )
        )
    experiment.judge(rejoins_under_a_new_id(restarts, band))
