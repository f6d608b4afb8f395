"""Where tasks and actors land (docs: scheduling strategies, resources): SCHED-01 … SCHED-05.

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
    record,
    status_now,
)

WORKERS_2X4 = [{"name": "worker", "count": 2, "num_cpus": 4}]
#: SCHED-02, measured on 2.60 and 2.59 (findings notes): head count, then the workers' sorted.
#: Actors are placed one by one: the policy, not the lag of the raylets' resource reports
#: (``workloads.scheduling.place``).
HYBRID = {2: (2, [0, 0]), 4: (2, [0, 2]), 6: (2, [2, 2]), 12: (4, [4, 4])}


#: SCHED-01's actors and tasks: fewer than the cluster's 12 CPUs, and a count DEFAULT places
#: unevenly (HYBRID[4]).
SPREAD_N = 4


def worker_counts(counts: dict[str, int]) -> list[int]:
    return sorted(v for k, v in counts.items() if k.startswith("worker"))


def check_spread(result: dict[str, Any], nodes: list[str]) -> None:
    counts = result["counts"]
    assert set(nodes) <= set(counts), f"every alive CPU node is counted: {counts}"
    placed = [counts[n] for n in nodes]
    assert sum(counts.values()) == result["n"], counts
    assert max(placed) - min(placed) <= 1, f"SPREAD must balance within 1: {counts}"


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
    for n, kind in ((SPREAD_N, "actor"), (SPREAD_N, "task")):
        spread = cluster.run(
            "workloads.scheduling:place", n=n, strategy="SPREAD", kind=kind, hold_s=2
        ).result()
        record(experiment, f"SCHED-01 SPREAD {n} {kind}s per node", spread["counts"])
        assert spread["driver_node"] == "head"
        check_spread(spread, nodes)
        assert spread["cpu_after"]["available"] == spread["cpu_after"]["total"] == 12

    # SCHED-02: DEFAULT (hybrid) actors from a driver on the head.
    series = cluster.run(
        "workloads.scheduling:place_series", ns=sorted(HYBRID), strategy="DEFAULT", one_by_one=True
    ).result()
    record(experiment, "SCHED-02 DEFAULT actors per node", {r["n"]: r["counts"] for r in series})
    for r in series:
        head, workers = HYBRID[r["n"]]
        assert (r["counts"]["head"], worker_counts(r["counts"])) == (head, workers), (
            f"n={r['n']}: hybrid policy placed {r['counts']}, expected head {head}, "
            f"workers {workers} (spread threshold 0.5 of 4 CPUs)"
        )

    # SCHED-04: a resource only the head has (custom, then node:<head ip>), 3 actors for 1 unit.
    for use_node_ip in (False, True):
        label = "node:<head ip>" if use_node_ip else "special"
        only = cluster.run(
            "workloads.scheduling:only_head_resource", n=3, use_node_ip=use_node_ip
        ).result()
        record(experiment, f"SCHED-04 {label}: ray status", only["ray_status"])
        record(
            experiment,
            f"SCHED-04 {label}: placement",
            {k: only[k] for k in ("first_wave_nodes", "pending_count", "second_wave_nodes")},
        )
        assert only["total_in_cluster"] == 1
        assert only["first_wave_nodes"] == ["head"], only
        assert only["pending_count"] == 2, only
        live = [s for s in only["actor_states"] if s != "DEAD"]
        assert live.count("PENDING_CREATION") == 2 and live.count("ALIVE") == 1, only
        key = next(iter(only["resources"]))
        assert any(
            f"{{'{key}': 1.0}}" in line and "pending" in line for line in only["pending_demands"]
        ), f"ray status must list the waiting demand: {only['pending_demands']}"
        assert only["second_wave_nodes"] == ["head"], "the next one lands on the head too"
    serial = cluster.run("workloads.scheduling:tasks_on_head_resource", n=4, hold_s=2).result()
    record(experiment, "SCHED-04 special tasks", serial)
    assert serial["counts"] == {"head": 4, "worker-1": 0, "worker-2": 0}, serial
    assert serial["seconds"] >= serial["serial_bound_s"], "one unit: the tasks run one at a time"
    assert "PENDING_NODE_ASSIGNMENT" in serial["states_while_serial"], serial

    # SCHED-05: NodeAffinity to a node id that does not exist, then to a killed node.
    fake = cluster.run("workloads.scheduling:affinity_to_dead", use_fake_id=True).result()
    experiment.nemesis.kill_node("worker-2")
    dead = cluster.run("workloads.scheduling:affinity_to_dead", node_name="worker-2").result()
    record(experiment, "SCHED-05 affinity", {"never existed": fake, "killed worker-2": dead})
    assert dead["dead_node_id"] == cluster.node("worker-2").node_id
    for case in (fake, dead):
        for kind, error in (
            ("task", "TaskUnschedulableError"),
            ("actor", "ActorUnschedulableError"),
        ):
            hard = case[f"{kind}_soft=False"]
            assert not hard["ok"] and hard["error"]["type"] == error, hard
            assert "NodeAffinitySchedulingStrategy" in hard["error"]["message"]
            soft = case[f"{kind}_soft=True"]
            assert soft["ok"] and soft["node"] in {"head", "worker-1"}, soft


@pytest.mark.claim("SCHED-03")
@pytest.mark.cluster(driver=False, head={"num_cpus": 0}, workers=WORKERS_2X4)
def test_zero_cpu_head_gets_no_cpu_work(experiment: Experiment) -> None:
    """With ``--num-cpus=0`` on the head, no CPU actor or task lands there, whatever the
    strategy, even with the driver on the head."""
    cluster = experiment.cluster
    cases = [("DEFAULT", "actor", 8), ("SPREAD", "actor", 8), ("DEFAULT", "task", 8)]
    seen: dict[str, Any] = {}
    for strategy, kind, n in cases:
        r = cluster.run(
            "workloads.scheduling:place", n=n, strategy=strategy, kind=kind, hold_s=2
        ).result()
        seen[f"{strategy} {n} {kind}s"] = r["counts"]
        assert r["driver_node"] == "head"
        assert r["counts"]["head"] == 0, f"{strategy} {kind}s landed on the 0-CPU head: {r}"
        assert sum(r["counts"].values()) == n
    record(experiment, "SCHED-03 per node", seen)
    status = status_now(experiment, "SCHED-03 idle")
    assert "/8.0 CPU" in status, f"the head adds no CPU to the cluster: {status}"
