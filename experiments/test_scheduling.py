"""Where tasks and actors land (docs: scheduling strategies, resources): SCHED-01 … SCHED-05;
the verdicts: ``verdicts.scheduling``.

Topology A: a 4-CPU head holding the only ``special`` resource and two 4-CPU workers; the
driver runs on the head, as in the runbook. Topology B: the same with a 0-CPU head.
Knobs shortened: health checks (FAST_HEALTH_CHECKS), so the killed worker of SCHED-05 is DEAD in
seconds. Workloads: ``workloads.scheduling``; per-node counts come back keyed by node name.
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.testing import (
    FAST_HEALTH_CHECKS,
    Experiment,
    WorkloadError,
    record,
    status_now,
)

from .verdicts.scheduling import (
    affinity_to_dead,
    head_only_resource,
    hybrid_policy,
    spread_evenly,
    unbalanced,
    zero_cpu_head,
)
from .verdicts.scheduling import (
    worker_counts as worker_counts,  # test_advice.py takes it from here
)

WORKERS_2X4 = [{"name": "worker", "count": 2, "num_cpus": 4}]
#: SCHED-02, measured on 2.60 and 2.59 (findings notes): head count, then the workers' sorted.
#: Actors are placed one by one: the policy, not the lag of the raylets' resource reports
#: (``workloads.scheduling.place``).
HYBRID = {2: (2, [0, 0]), 4: (2, [0, 2]), 6: (2, [2, 2]), 12: (4, [4, 4])}


#: SCHED-01's actors and tasks: fewer than the cluster's 12 CPUs, and a count DEFAULT places
#: unevenly (HYBRID[4]).
SPREAD_N = 4


def check_spread(result: dict[str, Any], nodes: list[str]) -> None:
    """SCHED-01's balance check on one placement, as an assertion
    (``tests/unit/test_sched_spread.py``; the experiment judges ``spread_evenly``)."""
    problem = unbalanced(result, nodes)
    assert problem is None, problem


def placed(experiment: Experiment, **kwargs: Any) -> dict[str, Any]:
    """``workloads.scheduling:place``'s result, from a driver on the head (the set-up)."""
    result: dict[str, Any] = experiment.cluster.run(
        "workloads.scheduling:place", hold_s=2, **kwargs
    ).result()
    if result["driver_node"] != "head":
        raise WorkloadError(f"set-up: the driver must run on the head: {result['driver_node']}")
    return result


def head_only_waves(experiment: Experiment) -> dict[str, Any]:
    """SCHED-04's actors: 3 for the head's one unit of ``special``, then of node:<head ip>."""
    waves: dict[str, Any] = {}
    for use_node_ip in (False, True):
        label = "node:<head ip>" if use_node_ip else "special"
        only = experiment.cluster.run(
            "workloads.scheduling:only_head_resource", n=3, use_node_ip=use_node_ip
        ).result()
        record(experiment, f"SCHED-04 {label}: ray status", only["ray_status"])
        record(
            experiment,
            f"SCHED-04 {label}: placement",
            {k: only[k] for k in ("first_wave_nodes", "pending_count", "second_wave_nodes")},
        )
        waves[label] = only
    return waves


@pytest.mark.claim("SCHED-01", "SCHED-02", "SCHED-04", "SCHED-05")
@pytest.mark.cluster(
    driver=False,
    head={"num_cpus": 4, "resources": {"special": 1}},
    workers=WORKERS_2X4,
    env=FAST_HEALTH_CHECKS,
)
def test_spread_hybrid_head_only_resource_and_affinity(experiment: Experiment) -> None:
    """SPREAD balances; DEFAULT fills the head to the 0.5 spread threshold, then spreads; a
    head-only resource pins work to the head and queues the rest; affinity to a dead node fails
    with soft=False and runs elsewhere with soft=True."""
    cluster = experiment.cluster
    nodes = ["head", "worker-1", "worker-2"]

    # SCHED-01: 4 actors and 4 tasks with SPREAD, a third of the 12 CPUs, so capacity forces
    # nothing: DEFAULT places 4 actors head 2, workers 0 and 2 (SCHED-02 below), which
    # check_spread refuses (tests/unit/test_sched_spread.py).
    spread: dict[str, Any] = {}
    for n, kind in ((SPREAD_N, "actor"), (SPREAD_N, "task")):
        result = placed(experiment, n=n, strategy="SPREAD", kind=kind)
        record(experiment, f"SCHED-01 SPREAD {n} {kind}s per node", result["counts"])
        spread[f"SPREAD {n} {kind}s"] = result
    experiment.judge(spread_evenly(spread, nodes, 12))  # the cluster's CPUs: 3 nodes x 4

    # SCHED-02: DEFAULT (hybrid) actors from a driver on the head.
    series = cluster.run(
        "workloads.scheduling:place_series", ns=sorted(HYBRID), strategy="DEFAULT", one_by_one=True
    ).result()
    record(experiment, "SCHED-02 DEFAULT actors per node", {r["n"]: r["counts"] for r in series})
    experiment.judge(hybrid_policy(series, HYBRID))

    # SCHED-04: a resource only the head has (custom, then node:<head ip>), 3 actors for 1 unit.
    waves = head_only_waves(experiment)
    serial = cluster.run("workloads.scheduling:tasks_on_head_resource", n=4, hold_s=2).result()
    record(experiment, "SCHED-04 special tasks", serial)
    experiment.judge(head_only_resource(waves, serial))

    # SCHED-05: NodeAffinity to a node id that does not exist, then to a killed node.
    fake = cluster.run("workloads.scheduling:affinity_to_dead", use_fake_id=True).result()
    experiment.nemesis.kill_node("worker-2")
    dead = cluster.run("workloads.scheduling:affinity_to_dead", node_name="worker-2").result()
    record(experiment, "SCHED-05 affinity", {"never existed": fake, "killed worker-2": dead})
    if dead["dead_node_id"] != cluster.node("worker-2").node_id:
        raise WorkloadError(f"set-up: the affinity must name worker-2's id: {dead}")
    cases = {"never existed": fake, "killed worker-2": dead}
    experiment.judge(affinity_to_dead(cases, frozenset({"head", "worker-1"})))


@pytest.mark.claim("SCHED-03")
@pytest.mark.cluster(driver=False, head={"num_cpus": 0}, workers=WORKERS_2X4)
def test_zero_cpu_head_gets_no_cpu_work(experiment: Experiment) -> None:
    """With ``--num-cpus=0`` on the head, no CPU actor or task lands there, whatever the
    strategy, even with the driver on the head."""
    cases = [("DEFAULT", "actor", 8), ("SPREAD", "actor", 8), ("DEFAULT", "task", 8)]
    runs = {
        f"{strategy} {n} {kind}s": placed(experiment, n=n, strategy=strategy, kind=kind)
        for strategy, kind, n in cases
    }
    record(experiment, "SCHED-03 per node", {label: r["counts"] for label, r in runs.items()})
    status = status_now(experiment, "SCHED-03 idle")
    experiment.judge(zero_cpu_head(runs, status, 8))  # the workers' CPUs: 2 x 4
