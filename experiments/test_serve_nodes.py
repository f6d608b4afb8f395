"""Ray Serve when a worker node hosting replicas dies (docs: serve/production-guide/
fault-tolerance, "Worker node failure"): SERVE-03. The verdict: ``verdicts.serve``."""

from __future__ import annotations

import time

import pytest

from chaos.testing import (
    FAST_HEALTH_CHECKS,
    CheckFailed,
    Experiment,
    await_dead,
    holds_for,
    node_dead_event,
    wait_until,
)

from .serving import (
    AFTER_S,
    ECHO_REPLICA,
    JITTER,
    NEEDS_SERVE,
    PERIOD_S,
    REQUEST_TIMEOUT_S,
    START_S,
    WORKERS_2_ROOMY,
    alive,
    deploy_echo,
    first_alive,
    one_per_worker,
    record_failures,
    serving,
    shutdown_serve,
    start_load,
    stop_load,
)
from .verdicts.serve_nodes import NodeDeath, replicas_moved

pytestmark = [NEEDS_SERVE]


@pytest.mark.claim("SERVE-03")
@pytest.mark.cluster(
    driver=False, env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_2_ROOMY
)
def test_worker_node_death_moves_its_replicas_to_survivors(experiment: Experiment) -> None:
    """Two replicas, one per worker (2 CPUs each): worker-1 is killed. Its replica is started
    again on worker-2 once Ray declares worker-1 dead; traffic through worker-2's and the
    head's proxies keeps being answered."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    deploy_echo(
        experiment, ["worker-1", "worker-2", "head"], num_replicas=2, num_cpus=1,
        health_check_period_s=PERIOD_S,
    )  # fmt: skip
    replicas = one_per_worker(experiment)
    before_ids = {r["actor_id"] for r in replicas.values()}
    targets = ["worker-2", "head"]
    run = start_load(experiment, targets)
    victim_id = str(cluster.node("worker-1").node_id)
    survivor_id = str(cluster.node("worker-2").node_id)
    kill = experiment.nemesis.kill_node("worker-1")
    await_dead(experiment, kill, victim_id, "SERVE-03 worker-1 killed")

    def moved() -> None:
        rows = alive(experiment, ECHO_REPLICA)
        if len(rows) != 2 or any(r["node_id"] != survivor_id for r in rows):
            raise CheckFailed(f"replicas: {rows}")

    bound = band.high + JITTER * PERIOD_S + START_S
    wait_until(moved, bound + 30, "both replicas ALIVE on worker-2")
    holds_for(serving(run, targets), AFTER_S, "the surviving proxies answer after the move")
    load = stop_load(experiment, run)
    record_failures(experiment, load, "client: failures")
    if replicas["worker-2"]["actor_id"] not in {
        r["actor_id"] for r in alive(experiment, ECHO_REPLICA)
    }:
        raise CheckFailed("SERVE-03: the survivor's replica must be the same actor")
    # Until the GCS declares worker-1 dead, a proxy may still route to its replica: Ray has no
    # earlier word of the death. Judged: requests sent after the GCS's time of death.
    dead = node_dead_event(experiment.history, victim_id, kill.injected_at)
    if dead is None:
        raise CheckFailed("the observer never saw worker-1 DEAD")
    end_ms = dead.get("end_time_ms")
    death = NodeDeath(
        killed_at=kill.injected_at,
        dead_at=end_ms / 1000 if isinstance(end_ms, int | float) and end_ms > 0 else dead.t,
        new_alive=first_alive(experiment, ECHO_REPLICA, kill.injected_at, before_ids, survivor_id),
        end=time.time(),
    )
    experiment.judge(
        replicas_moved(load, death, (band.low, band.high), bound, targets, REQUEST_TIMEOUT_S)
    )
    shutdown_serve(experiment)
