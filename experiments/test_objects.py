"""Object failures (docs: fault_tolerance/objects): OBJ-01 … OBJ-06.

Knobs shortened: health checks (FAST_HEALTH_CHECKS), so a killed node is DEAD in seconds;
OBJ-06 also caps ``RAY_max_lineage_bytes`` (default 1 GB) at 100 kB so seven ~20 KiB task
specs overrun it once. Workloads: ``workloads.objects`` — every object's only copy sits on the
node the host kills (``ray.wait(fetch_local=False)``); the workload waits for the death, then
reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from chaos.testing import (
    AFTER_DEATH_S,
    CORE_WORKER_RECONNECT_TIMEOUT_S,
    FAST_HEALTH_CHECKS,
    KILL_NODE,
    KILL_PROCESS,
    LINEAGE_EVICTED,
    MAX_ATTEMPTS_EXCEEDED,
    RETRIES_DISABLED,
    ChaosError,
    CheckFailed,
    Experiment,
    applies,
    attempts,
    await_dead,
    dead_in_band,
    expected,
    lost_object_error,
    since,
    strike_on,
)

MB = 1024 * 1024
WORKERS_2 = [{"name": "worker", "count": 2, "num_cpus": 1}]
WORKERS_3 = [{"name": "worker", "count": 3, "num_cpus": 1}]
#: ``lineage_reconstruction(losses>1)`` waits this long after the last loss before reading
#: (``_wait_executions(..., 10)`` in workloads/objects.py), for an unwanted eager re-execution.
#: Measured in OBJ-03 (4 runs, 3 December 2026, data/obj.json): the first loss's eager
#: re-execution had its object ready 1.3-4.7 s after ``ray.nodes()`` showed the node DEAD, and
#: the final read failed 10.0-10.5 s after the second DEAD: the whole wait, then the read.
EAGER_WAIT_S = 10.0
#: The owner's death is seen by RPC failure, not by health checks. Ray documents no window;
#: the bound separates "raises" from "hangs". It includes the workload's own reachability
#: probes (5 s each): observed 1-4 s idle, 17.7 s at load average 44 on 2 cores (CI).
OWNER_GONE_S = 30.0
#: How often a Ray gRPC client checks its channel's state
#: (``grpc_client_check_connection_status_interval_milliseconds``, 1000 by default,
#: ray_config_def.h; the experiments leave it so). A retrying client (retryable_grpc_client.cc)
#: looks at its unavailability deadline once per check, so it gives up up to one check late.
CHANNEL_CHECK_S = 1.0


def owner_gone_window(experiment: Experiment) -> tuple[float, float]:
    """When a task on another node fails for want of a dead owner's object (expectations:
    ``core_worker_unavailable_backoff``).

    Its raylet asks the owner through a retrying client. From 2.51.0 that client re-checks
    within seconds: the bound is OWNER_GONE_S. Before, it gives up on the owner only after
    ``RAY_core_worker_rpc_server_reconnect_timeout_s`` (default 60 s) of unavailability, counted
    from the task's own subscription, which follows the owner's death.
    """
    if applies("core_worker_unavailable_backoff", experiment.ray_version):
        return 0.0, OWNER_GONE_S
    knob = experiment.cluster.knobs().get("RAY_core_worker_rpc_server_reconnect_timeout_s")
    wait = float(knob) if knob is not None else float(CORE_WORKER_RECONNECT_TIMEOUT_S)
    return wait, wait + CHANNEL_CHECK_S + OWNER_GONE_S


def check_lost(err: dict[str, Any] | None, version: str, reason: str) -> None:
    """The read failed with the class (and ``.reason``) ``version`` raises for ``reason``."""
    assert err is not None, "the read must fail"
    assert err["type"] == lost_object_error(reason, version), err
    assert "ObjectLostError" in [err["type"], *err["bases"]], err["bases"]
    if applies("lost_object_reason", version):
        assert err.get("reason") == reason, err.get("reason")
    else:
        assert err.get("reason") is None, err.get("reason")


@pytest.mark.claim("OBJ-01", "OBJ-02")
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_lost_output_is_reconstructed_only_with_retries(experiment: Experiment) -> None:
    """Lineage reconstruction re-runs the producer once (OBJ-01); with ``max_retries=0`` the
    driver gets RETRIES_DISABLED and a dependent task a RayTaskError wrapping it (OBJ-02)."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    version = experiment.ray_version

    run = cluster.run(
        "workloads.objects:lineage_reconstruction",
        on="worker-1",
        read_via="both",
        reader="worker-2",
        timeout=300,
    )
    kill, ready = strike_on(experiment, run, "object_ready", KILL_NODE)
    assert ready.get("node_name") == "worker-1", "the only copy must be on worker-1"
    seen = run.result(timeout=240)
    assert seen["task_error"] is None and seen["task_value"]["nbytes"] == 4 * MB, seen
    assert seen["driver_error"] is None and seen["driver_value"]["nbytes"] == 4 * MB, seen
    assert seen["executions"] == 2, f"exactly one re-execution: {seen['execution_nodes']}"
    assert seen["execution_nodes"][0] == "worker-1" != seen["execution_nodes"][1], seen
    assert attempts(seen["attempts"]) == [["FINISHED", None]] * 2, seen["attempts"]
    read = experiment.measure(
        "OBJ-01 kill → reconstructed read (s)", since(kill, seen["t_driver_outcome"])
    )
    assert read <= band.high + AFTER_DEATH_S, f"read back {read} s after the kill"
    dead_in_band(experiment, kill, seen["rounds"][0]["t_dead_seen"], "OBJ-01 kill")
    await_dead(experiment, kill, str(ready.get("node_id")), "OBJ-01 kill")

    run = cluster.run(
        "workloads.objects:lineage_reconstruction",
        on="worker-2",
        max_retries=0,
        read_via="both",
        reader="worker-3",
        timeout=300,
    )
    kill, ready = strike_on(experiment, run, "object_ready", KILL_NODE)
    assert ready.get("node_name") == "worker-2", "the only copy must be on worker-2"
    seen = run.result(timeout=240)
    check_lost(seen["driver_error"], version, RETRIES_DISABLED)
    task = seen["task_error"]
    assert task is not None and task["is_RayTaskError"], f"dependent task must fail: {task}"
    lost = lost_object_error(RETRIES_DISABLED, version)
    assert task["type"] == f"RayTaskError({lost})", task["type"]
    check_lost(task.get("cause"), version, RETRIES_DISABLED)
    assert seen["executions"] == 1, "max_retries=0: no reconstruction"
    failed = experiment.measure(
        "OBJ-02 kill → read fails (s)", since(kill, seen["t_driver_outcome"])
    )
    assert failed <= band.high + AFTER_DEATH_S, f"read failed {failed} s after the kill"
    dead_in_band(experiment, kill, seen["rounds"][0]["t_dead_seen"], "OBJ-02 kill")
    await_dead(experiment, kill, str(ready.get("node_id")), "OBJ-02 kill")


@pytest.mark.claim("OBJ-03")
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_object_lost_again_after_its_budget_is_unrecoverable(experiment: Experiment) -> None:
    """``max_retries=1``: the first loss is reconstructed (one retry used), the second is final
    with MAX_ATTEMPTS_EXCEEDED."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    run = cluster.run(
        "workloads.objects:lineage_reconstruction",
        on="worker-1",
        max_retries=1,
        losses=2,
        read_via="driver",
        timeout=400,
    )
    first_kill, first = strike_on(experiment, run, "object_ready", KILL_NODE)
    assert first.get("node_name") == "worker-1"
    second_kill, second = strike_on(experiment, run, "object_ready", KILL_NODE, count=2)
    assert second.get("node_name") not in (None, "worker-1"), "reconstructed elsewhere"
    seen = run.result(timeout=240)
    check_lost(seen["driver_error"], experiment.ray_version, MAX_ATTEMPTS_EXCEEDED)
    assert seen["executions"] == 2, "one reconstruction, then the budget is spent"
    assert seen["execution_nodes"][1] == second.get("node_name"), seen["execution_nodes"]
    experiment.measure(
        "OBJ-03 1st kill → re-executed (s)",
        since(first_kill, second.get("t_ready")),
    )
    failed = experiment.measure(
        "OBJ-03 2nd kill → read fails (s)", since(second_kill, seen["t_driver_outcome"])
    )
    # The workload reads only after giving the last loss 10 s to trigger an (unwanted)
    # eager re-execution, so that wait is part of this window.
    assert failed <= band.high + EAGER_WAIT_S + AFTER_DEATH_S, f"read failed after {failed} s"
    dead_in_band(experiment, first_kill, seen["rounds"][0]["t_dead_seen"], "OBJ-03 1st kill")
    dead_in_band(experiment, second_kill, seen["rounds"][1]["t_dead_seen"], "OBJ-03 2nd kill")
    await_dead(experiment, first_kill, str(first.get("node_id")), "OBJ-03 1st kill")
    await_dead(experiment, second_kill, str(second.get("node_id")), "OBJ-03 2nd kill")


@pytest.mark.claim("OBJ-05", "OBJ-04")
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_2)
def test_owner_death_loses_the_object_a_secondary_copy_does_not(experiment: Experiment) -> None:
    """OBJ-05: the owner's death is final for borrowers (``OwnerDiedError``). OBJ-04: a
    ``ray.put`` object survives the death of a node holding only a secondary copy."""
    cluster = experiment.cluster
    band = experiment.node_death_band()

    # The reader task runs on worker-1, which holds no copy: a node still holding the value
    # may serve it for a moment after the owner died (notes, OBJ-05 race).
    earliest, latest = owner_gone_window(experiment)
    run = cluster.run(
        "workloads.objects:owner_died",
        owner_on="worker-2",
        via="put",
        kill="host",
        read_on="worker-1",
        get_timeout_s=latest + 10,  # past the window: a hang is told from a late answer
        timeout=300 + 3 * latest,
    )
    kill, owner = strike_on(experiment, run, "owner_ready", KILL_PROCESS)
    assert owner.get("node_name") == "worker-2"
    seen = run.result(timeout=240 + 3 * latest)
    err = seen["driver_error"]
    assert err is not None and err["type"] == "OwnerDiedError", f"driver read: {err}"
    assert err["bases"][:2] == ["ObjectLostError", "RayError"], err["bases"]
    where = cluster.node("worker-2")
    location = expected("owner_died_location", experiment.ray_version)
    assert location.format(node_id=where.node_id, ip=where.ip) in err["message"], err["message"]
    task = seen["task_error"]
    assert task is not None and task["type"] == "RayTaskError(OwnerDiedError)", task
    read = experiment.measure(
        "OBJ-05 owner kill → task's RayTaskError(OwnerDiedError) (s)",
        since(kill, seen["t_task_outcome"]),
        band=(earliest, latest),
    )
    assert earliest <= read <= latest, f"task failed {read} s after the owner died"
    # The driver reads once the task's read ended: from 2.51.0 both fit in OWNER_GONE_S.
    # Before, the driver node's raylet starts its own wait on the owner then (2.50.1: the
    # task's read 60.4 s, the driver's 120.4 s after the kill).
    failed = experiment.measure(
        "OBJ-05 owner kill → OwnerDiedError (s)", since(kill, seen["t_driver_outcome"])
    )
    slow = not applies("core_worker_unavailable_backoff", experiment.ray_version)
    bound = read + latest if slow else OWNER_GONE_S
    assert failed <= bound, f"OwnerDiedError {failed} s after the owner died"

    run = cluster.run(
        "workloads.objects:put_secondary_copy", copy_on="worker-1", read_on="worker-2", timeout=300
    )
    kill, copy = strike_on(experiment, run, "secondary_copy", KILL_NODE)
    assert copy.get("node_name") == "worker-1"
    seen = run.result(timeout=240)
    # The claim is about a node holding only a secondary copy: the owner listed both copies,
    # the primary on the driver node and the secondary on worker-1, before the strike.
    copy_node, primary_node = str(copy.get("node_id")), seen["driver_node_id"]
    assert {copy_node, primary_node} <= set(seen["locations_before"]), seen["locations_before"]
    experiment.measure(
        "OBJ-04 copies listed by the owner before the kill", seen["locations_before"]
    )
    experiment.measure("OBJ-04 copies listed by the owner after the read", seen["locations_after"])
    assert seen["task_error"] is None and seen["task_value"]["nbytes"] == 4 * MB, seen
    assert seen["driver_error"] is None and seen["driver_value"]["nbytes"] == 4 * MB, seen
    read = experiment.measure("OBJ-04 kill → read (s)", since(kill, seen["t_driver_outcome"]))
    assert read <= band.high + AFTER_DEATH_S, f"read {read} s after the kill"
    dead_in_band(experiment, kill, seen["t_dead_seen"], "OBJ-04 kill")
    await_dead(experiment, kill, str(copy.get("node_id")), "OBJ-04 kill")


#: OBJ-06's lineage budget (Ray's default is 1 GB): seven ~20 KiB task specs overrun it once.
LINEAGE_BUDGET = 100_000
LINEAGE_ENV = {**FAST_HEALTH_CHECKS, "RAY_max_lineage_bytes": str(LINEAGE_BUDGET)}


class LineageOverEvicted(AssertionError):
    """OBJ-06's finding: an overrun of the lineage budget evicted more lineage than Ray's rule
    (the oldest specs, until at least ``total - budget / 2`` bytes are freed)."""


@dataclass(frozen=True)
class Overruns:
    """When the owner's lineage went past its budget, read from the owner's own log."""

    budget: int
    #: Bytes of one producer's task spec: the first overrun's total over the specs then held
    #: (every completion so far: nothing was evicted before it).
    footprint: int
    #: The completion (0-based producer index) after which each overrun was logged.
    at: tuple[int, ...]


def lineage_overruns(seen: dict[str, Any]) -> Overruns:
    """The overruns ``workloads.objects:lineage_evicted`` saw, checked against the knob."""
    assert seen["RAY_max_lineage_bytes"] == str(LINEAGE_BUDGET), "the cap must reach the owner"
    exceeded = seen["lineage_log"]["exceeded"]
    # Every spec carries the pad inline, so the specs outweigh the budget: Ray must notice.
    assert exceeded, f"no overrun logged: {seen['lineage_log']}"
    assert {e["limit"] for e in exceeded} == {LINEAGE_BUDGET}, exceeded
    counts = seen["overruns_after_completion"]
    at = tuple(counts.index(n) for n in range(1, len(exceeded) + 1) if n in counts)
    assert len(at) == len(exceeded), f"overruns {exceeded} not all logged by a completion {counts}"
    first = at[0] + 1  # specs held at the first overrun
    footprint = round(exceeded[0]["total"] / first)
    if footprint < seen["pad_bytes"]:
        raise ChaosError(f"a spec of {footprint} B cannot hold its {seen['pad_bytes']} B pad")
    # The first overrun comes exactly at the completion that takes the lineage past the knob.
    assert first * footprint > LINEAGE_BUDGET >= (first - 1) * footprint, (first, footprint)
    return Overruns(LINEAGE_BUDGET, footprint, at)


def rule_evictions(producers: int, footprint: int, budget: int) -> list[int]:
    """The producers whose lineage Ray's rule evicts, oldest first, when ``producers`` equal
    specs finish one at a time: on each completion past ``budget``, the owner evicts the oldest
    held specs until at least ``total - budget / 2`` bytes are freed (task_manager.cc,
    CompletePendingTask; ray_config_def.h: "50% of the current lineage will be evicted")."""
    held: list[int] = []
    evicted: list[int] = []
    for index in range(producers):
        held.append(index)
        total = len(held) * footprint
        if total > budget:
            freed = 0
            while held and freed < total - budget // 2:
                evicted.append(held.pop(0))
                freed += footprint
    return evicted


def lineage_outcome(experiment: Experiment, seen: dict[str, Any]) -> list[int]:
    """Check every object's read; return the producers whose lineage was evicted.

    An object with lineage is re-executed once and read back; an object without fails with
    the class (and ``.reason``) ``version`` raises for LINEAGE_EVICTED and is never re-run.
    """
    evicted = []
    for row in seen["objects"]:
        if row["error"] is None:
            assert row["executions"] == 2, f"object {row['index']} read without a re-run: {row}"
        else:
            check_lost(row["error"], experiment.ray_version, LINEAGE_EVICTED)
            assert row["executions"] == 1, f"object {row['index']} was re-executed: {row}"
            evicted.append(row["index"])
    return evicted


def evict_lineage(experiment: Experiment) -> tuple[dict[str, Any], Overruns, list[int]]:
    """Run ``lineage_evicted`` (seven producers on worker-1), kill worker-1, judge the reads."""
    run = experiment.cluster.run("workloads.objects:lineage_evicted", on="worker-1", timeout=400)
    kill, ready = strike_on(experiment, run, "object_ready", KILL_NODE)
    assert ready.get("node_name") == "worker-1", "every output must sit on worker-1"
    seen = run.result(timeout=300)
    overruns = lineage_overruns(seen)
    evicted = lineage_outcome(experiment, seen)
    experiment.measure("OBJ-06 task spec footprint (B)", overruns.footprint)
    experiment.measure("OBJ-06 overruns after completion", list(overruns.at))
    experiment.measure("OBJ-06 owner log: evicted (B)", seen["lineage_log"]["evicted"])
    experiment.measure("OBJ-06 lineage evicted (producers)", evicted)
    dead_in_band(experiment, kill, seen["t_dead_seen"], "OBJ-06 kill")
    await_dead(experiment, kill, str(ready.get("node_id")), "OBJ-06 kill")
    return seen, overruns, evicted


@pytest.mark.claim("OBJ-06")
@pytest.mark.cluster(env=LINEAGE_ENV, head={"num_cpus": 0}, workers=WORKERS_2)
def test_evicted_lineage_makes_a_loss_unrecoverable(experiment: Experiment) -> None:
    """Seven ~20 KiB task specs, finished one at a time, overrun a 100 kB lineage budget at
    the fifth. After the loss of every output, an object whose lineage was evicted fails with
    LINEAGE_EVICTED and is not re-run; the others are re-executed. Evicted: the oldest, at
    least what Ray's rule frees, and nothing that finished after the last overrun."""
    seen, overruns, evicted = evict_lineage(experiment)
    producers = len(seen["objects"])
    assert evicted, "an overrun must cost some object its lineage"
    assert evicted == list(range(len(evicted))), f"the oldest go first: {evicted}"
    needed = rule_evictions(producers, overruns.footprint, overruns.budget)
    experiment.measure("OBJ-06 Ray's rule evicts (producers)", needed)
    assert set(needed) <= set(evicted), f"Ray's rule evicts {needed}, evicted {evicted}"
    last = overruns.at[-1]
    assert evicted[-1] <= last, f"{evicted} lost lineage after the last overrun ({last})"
    kept = [row["index"] for row in seen["objects"] if row["error"] is None]
    assert set(range(last + 1, producers)) <= set(kept), f"kept {kept}, last overrun {last}"


@pytest.mark.claim("OBJ-06")
@pytest.mark.cluster(env=LINEAGE_ENV, head={"num_cpus": 0}, workers=WORKERS_2)
@pytest.mark.xfail(
    strict=True,
    raises=LineageOverEvicted,
    reason="FINDING: one overrun of RAY_max_lineage_bytes evicts the lineage of every object "
    "in scope, not the oldest down to half the budget. Budget 100000 B, seven producers "
    "finished one at a time (21527-21542 B specs): the fifth overran it (107635-107710 B); "
    "Ray's rule (task_manager.cc CompletePendingTask: evict the oldest until >= total - "
    "budget/2 (57635-57710 B) are freed; ray_config_def.h: '50% of the current lineage will be "
    "evicted') evicts the 3 oldest, but all 5 lost lineage and only the 2 later ones were "
    "re-executed, in 10 of 10 runs (2.60.0 x4, 2.55.1 x2, 2.50.1 x4). "
    "TaskManager::RemoveLineageReference returns the footprint's change (<= 0), so "
    "ReferenceCounter::EvictLineage's loop (evicted < min) runs until its queue is empty; the "
    "owner logs e.g. 'Evicted -0.107695MB of task lineage.'",
)
def test_lineage_overrun_evicts_only_down_to_half_the_budget(experiment: Experiment) -> None:
    """Ray's own rule for the budget (see :func:`rule_evictions`) decides how many producers
    lose lineage; the finding: all of them do."""
    seen, overruns, evicted = evict_lineage(experiment)
    needed = rule_evictions(len(seen["objects"]), overruns.footprint, overruns.budget)
    # Only over-eviction is this finding: the oldest, a strict superset of the rule's set.
    # Under-eviction or another set would be a different finding, so it fails the xfail.
    if not set(needed) <= set(evicted):
        raise CheckFailed(f"lineage evicted for producers {evicted}, Ray's rule evicts {needed}")
    if set(needed) < set(evicted):
        raise LineageOverEvicted(
            f"lineage evicted for producers {evicted}, Ray's rule evicts {needed} "
            f"({overruns.footprint} B specs, {overruns.budget} B budget, overruns after "
            f"completions {list(overruns.at)}; owner logged evicted bytes "
            f"{seen['lineage_log']['evicted']})"
        )
