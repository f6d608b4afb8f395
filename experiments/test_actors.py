"""Actor failures (docs: fault_tolerance/actors, fault_tolerance/objects): ACTOR-01 … ACTOR-05.

Knobs shortened: health checks (FAST_HEALTH_CHECKS), so a killed node is DEAD in seconds.
Workloads: ``workloads.actors``; each emits an event naming the actor's pid and node, the host
strikes through the nemesis, and the workload reports what the caller saw (errors as data)
plus the State API's view (state, ``num_restarts``, death cause).
"""

from __future__ import annotations

import pytest

from chaos.testing import (
    AFTER_DEATH_S,
    FAST_HEALTH_CHECKS,
    KILL_NODE,
    KILL_PROCESS,
    RETRIES_DISABLED,
    Experiment,
    WorkloadError,
    actor_states,
    applies,
    await_dead,
    dead_in_band,
    expected,
    lost_object_error,
    strike_on,
)

from .verdicts.actors import (
    LostOutput,
    Struck,
    calls_during_restart,
    dies_with_owner,
    dies_without_restarts,
    output_reconstructed,
    restarts_once,
)

WORKERS_1 = [{"name": "worker-1", "count": 1, "num_cpus": 1}]  # one node called worker-1
WORKERS_2 = [{"name": "worker", "count": 2, "num_cpus": 1}]
WORKERS_3 = [{"name": "worker", "count": 3, "num_cpus": 1}]


def final_error(version: str) -> str:
    """The final error of a dead actor: ActorDiedError, a RayActorError (expectations)."""
    return expected("actor_died_error", version)


@pytest.mark.claim("ACTOR-01")
@pytest.mark.cluster(driver=False, env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_2)
def test_actor_without_restarts_dies_with_its_process_or_node(experiment: Experiment) -> None:
    """``max_restarts=0``: not restarted; calls fail with ActorDiedError; State API DEAD with
    death cause WORKER_DIED (process SIGKILL) or NODE_DIED (node killed)."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    version = experiment.ray_version

    run = cluster.run("workloads.actors:actor_dies", on="worker-2", kill="host", timeout=300)
    kill, _ = strike_on(experiment, run, "actor_alive", KILL_PROCESS)
    seen = run.result(timeout=240)
    observed = actor_states(experiment, seen["actor_id"], fresh=True)
    process = Struck(seen, kill.injected_at, observed)

    victim_id = str(cluster.node("worker-1").node_id)
    run = cluster.run("workloads.actors:actor_dies", on="worker-1", kill="host", timeout=300)
    kill, alive = strike_on(experiment, run, "actor_alive", KILL_NODE)
    if alive.get("node_id") != victim_id:
        raise WorkloadError(f"set-up: the actor must live on worker-1: {alive}")
    seen = run.result(timeout=240)
    await_dead(experiment, kill, victim_id, "ACTOR-01 node kill")
    node = Struck(seen, kill.injected_at)
    experiment.judge(dies_without_restarts(process, node, band, final_error(version)))


@pytest.mark.claim("ACTOR-02")
@pytest.mark.cluster(driver=False, env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_restarted_actor_loses_state_and_moves_off_a_dead_node(experiment: Experiment) -> None:
    """``max_restarts=1``: the first death restarts the actor (``__init__`` again, in-memory
    state lost; on another node if its node died), ``num_restarts`` 1; the second is final."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    version = experiment.ray_version

    run = cluster.run("workloads.actors:actor_restarts", on="worker-1", kill="host", timeout=400)
    kill, _ = strike_on(experiment, run, "actor_alive", KILL_PROCESS)
    strike_on(experiment, run, "actor_alive", KILL_PROCESS, count=2)
    seen = run.result(timeout=300)
    observed = actor_states(experiment, seen["actor_id"], fresh=True)
    process = Struck(seen, kill.injected_at, observed)

    run = cluster.run("workloads.actors:actor_restarts", on="worker-2", kill="host", timeout=400)
    kill, alive = strike_on(experiment, run, "actor_alive", KILL_NODE)
    if alive.get("node_name") != "worker-2":
        raise WorkloadError(f"set-up: the actor must live on worker-2: {alive}")
    strike_on(experiment, run, "actor_alive", KILL_NODE, count=2)
    seen = run.result(timeout=300)
    observed = actor_states(experiment, seen["actor_id"], fresh=True)
    # This workload does not poll ray.nodes(); the observer proves the death (its timing is
    # recorded, not held against the band: see chaos.check.deaths.await_dead).
    await_dead(experiment, kill, str(alive.get("node_id")), "ACTOR-02 node kill")
    node = Struck(seen, kill.injected_at, observed)
    latest = band.high + AFTER_DEATH_S
    experiment.judge(restarts_once(process, node, final_error(version), latest))


@pytest.mark.claim("ACTOR-03", "ACTOR-04")
@pytest.mark.cluster(driver=False, head={"num_cpus": 0}, workers=WORKERS_2)
def test_calls_during_a_restart_and_owner_death(experiment: Experiment) -> None:
    """ACTOR-03: calls queued when the actor dies fail with ActorUnavailableError unless
    ``max_task_retries=-1`` (then all succeed, in order). ACTOR-04: a non-detached actor dies
    with its owner despite restarts left (OWNER_DIED; REF_DELETED before 2.51.0); a detached
    one survives."""
    cluster = experiment.cluster
    version = experiment.ray_version

    # Call 10 of 40 SIGKILLs the actor's own process (max_restarts=1). A call that ran before
    # the kill can still fail: its reply may leave after the next call (the kill) started, and
    # dies with the process (Ray promises at-most-once execution, not delivery); its line in
    # the node's log proves it ran (seen 1 of 10 on an idle 2.59 host).
    no_retries = cluster.run(
        "workloads.actors:calls_during_restart", on="worker-1", max_task_retries=0, timeout=300
    ).result()
    retried = cluster.run(
        "workloads.actors:calls_during_restart", on="worker-1", max_task_retries=-1, timeout=300
    ).result()
    experiment.judge(calls_during_restart(no_retries, retried))

    run = cluster.run(
        "workloads.actors:owner_dies",
        parent_on="worker-1",
        child_on="worker-2",
        kill="host",
        timeout=300,
    )
    kill, _ = strike_on(experiment, run, "parent_alive", KILL_PROCESS)
    seen = run.result(timeout=240)
    # The cause the GCS records: OWNER_DIED, or on 2.50.1 REF_DELETED (expectations:
    # owner_death_cause; the child still dies with its owner and is not restarted).
    cause = expected("owner_death_cause", version)
    experiment.judge(dies_with_owner(Struck(seen, kill.injected_at), final_error(version), cause))


@pytest.mark.claim("ACTOR-05")
@pytest.mark.cluster(driver=False, env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_actor_task_output_is_reconstructed_only_with_task_retries(experiment: Experiment) -> None:
    """An actor task's output lost with its node: ``max_task_retries=0`` → unreconstructable
    (RETRIES_DISABLED); ``-1`` → the restarted actor re-runs the method."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    version = experiment.ray_version
    struck = []
    for node, retries, label in (
        ("worker-1", 0, "ACTOR-05 kill"),
        ("worker-2", -1, "ACTOR-05 -1 kill"),
    ):
        run = cluster.run(
            "workloads.actors:actor_output_lost",
            on=node,
            max_restarts=1,
            max_task_retries=retries,
            timeout=300,
        )
        kill, ready = strike_on(experiment, run, "object_ready", KILL_NODE)
        if ready.get("node_name") != node:
            raise WorkloadError(f"set-up: the object must be on {node}: {ready}")
        seen = run.result(timeout=240)
        dead_in_band(experiment, kill, seen["t_dead_seen"], label)
        await_dead(experiment, kill, str(ready.get("node_id")), label)
        struck.append(Struck(seen, kill.injected_at))
    reason = RETRIES_DISABLED if applies("lost_object_reason", version) else None
    expect = LostOutput(
        lost_object_error(RETRIES_DISABLED, version), reason, band.high + AFTER_DEATH_S
    )
    experiment.judge(output_reconstructed(struck[0], struck[1], expect))
