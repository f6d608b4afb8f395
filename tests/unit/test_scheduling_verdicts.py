"""SCHED-01 … SCHED-05's verdicts on records shaped as ``workloads.scheduling`` reports them
(the counts and texts of docs/evidence/data/sched.json and cluster-behaviour.md, 2.60.0)."""

from __future__ import annotations

from typing import Any

from chaos.testing import MissingEvidence
from experiments.verdicts.scheduling import (
    affinity_to_dead,
    head_only_resource,
    hybrid_policy,
    spread_evenly,
    unbalanced,
    zero_cpu_head,
)

NODES = ["head", "worker-1", "worker-2"]
FREE = {"available": 12.0, "total": 12.0, "waited_s": 0.55}


def placement(head: int, w1: int, w2: int, free: dict[str, float] = FREE) -> dict[str, Any]:
    counts = {"head": head, "worker-1": w1, "worker-2": w2}
    return {"n": head + w1 + w2, "counts": counts, "cpu_after": free}


def test_sched01_spread_balances_and_frees_every_cpu() -> None:
    runs = {"SPREAD 4 actors": placement(2, 1, 1), "SPREAD 4 tasks": placement(1, 2, 1)}
    held = spread_evenly(runs, NODES, 12)
    assert (held.claim, held.outcome) == ("SCHED-01", "held")
    # DEFAULT's placement of as many actors (SCHED-02: head 2, workers 0 and 2).
    uneven = spread_evenly({**runs, "SPREAD 4 actors": placement(2, 0, 2)}, NODES, 12)
    assert uneven.outcome == "failed"
    assert "SPREAD 4 actors: SPREAD must balance within 1" in uneven.reason
    held_cpu = placement(1, 2, 1, {"available": 11.0, "total": 12.0})
    kept = spread_evenly({**runs, "SPREAD 4 tasks": held_cpu}, NODES, 12)
    assert "all 12 CPUs free afterwards" in kept.reason


def test_the_balance_check_names_what_is_off() -> None:
    assert unbalanced(placement(2, 1, 1), NODES) is None
    missing = {"n": 4, "counts": {"head": 2, "worker-1": 2}}
    assert "every alive CPU node is counted" in str(unbalanced(missing, NODES))
    lost = {"n": 5, "counts": {"head": 2, "worker-1": 1, "worker-2": 1}}
    assert "5 placed expected" in str(unbalanced(lost, NODES))


HYBRID = {2: (2, [0, 0]), 4: (2, [0, 2]), 6: (2, [2, 2]), 12: (4, [4, 4])}
SERIES = [placement(2, 0, 0), placement(2, 2, 0), placement(2, 2, 2), placement(4, 4, 4)]


def test_sched02_default_fills_the_head_to_the_threshold_then_spreads() -> None:
    held = hybrid_policy(SERIES, HYBRID)
    assert (held.claim, held.outcome) == ("SCHED-02", "held")
    # Which worker fills first varies: 2/0/2 is 2/2/0.
    assert hybrid_policy([placement(2, 0, 2)], HYBRID).held
    spread = hybrid_policy([*SERIES[:1], placement(1, 2, 1)], HYBRID)
    assert spread.outcome == "failed"
    assert "n=4: hybrid policy placed" in spread.reason
    assert "expected head 2, workers [0, 2]" in spread.reason


STATUS = "Pending Demands:\n {'special': 1.0}: 2+ pending tasks/actors\n"


def wave(resource: str = "special") -> dict[str, Any]:
    return {
        "resources": {resource: 1.0},
        "total_in_cluster": 1.0,
        "first_wave_nodes": ["head"],
        "pending_count": 2,
        "actor_states": ["ALIVE", "PENDING_CREATION", "PENDING_CREATION"],
        "second_wave_nodes": ["head"],
        "pending_demands": [f"{{'{resource}': 1.0}}: 2+ pending tasks/actors"],
    }


WAVES = {"special": wave(), "node:<head ip>": wave("node:172.28.0.10")}
SERIAL = {
    "counts": {"head": 4, "worker-1": 0, "worker-2": 0},
    "states_while_serial": ["PENDING_NODE_ASSIGNMENT"] * 3 + ["SUBMITTED_TO_WORKER"],
    "seconds": 8.8,
    "serial_bound_s": 8,
}


def test_sched04_a_head_only_resource_pins_work_to_the_head_and_queues_the_rest() -> None:
    held = head_only_resource(WAVES, SERIAL)
    assert (held.claim, held.outcome) == ("SCHED-04", "held")
    elsewhere = head_only_resource(
        {**WAVES, "special": {**wave(), "second_wave_nodes": []}}, SERIAL
    )
    assert elsewhere.outcome == "failed"
    assert "special: the next one lands on the head too" in elsewhere.reason
    unlisted = {**WAVES, "node:<head ip>": {**wave("node:172.28.0.10"), "pending_demands": []}}
    assert "must list the waiting demand" in head_only_resource(unlisted, SERIAL).reason
    parallel = head_only_resource(WAVES, {**SERIAL, "seconds": 2.3})
    assert "one at a time" in parallel.reason
    spilled = {**SERIAL, "counts": {"head": 3, "worker-1": 1, "worker-2": 0}}
    assert "the tasks all on the head" in head_only_resource(WAVES, spilled).reason


def test_sched04_a_wave_without_its_resource_cannot_decide() -> None:
    unknown = head_only_resource({"special": {**wave(), "resources": {}}}, SERIAL)
    assert unknown.outcome == "unknown"
    assert isinstance(unknown.error(), MissingEvidence)


def unschedulable(kind: str) -> dict[str, Any]:
    error = "TaskUnschedulableError" if kind == "task" else "ActorUnschedulableError"
    message = (
        f"The {kind} is not schedulable: The node specified via NodeAffinitySchedulingStrategy "
        "doesn't exist any more or is infeasible, and soft=False was specified."
    )
    return {"ok": False, "error": {"type": error, "message": message}, "seconds": 0.32}


CASE = {
    "task_soft=False": unschedulable("task"),
    "actor_soft=False": unschedulable("actor"),
    "task_soft=True": {"ok": True, "node": "head", "seconds": 2.03},
    "actor_soft=True": {"ok": True, "node": "head", "seconds": 0.55},
}
ALIVE = frozenset({"head", "worker-1"})


def test_sched05_affinity_to_a_dead_node_fails_hard_and_runs_elsewhere_soft() -> None:
    cases = {"never existed": CASE, "killed worker-2": CASE}
    held = affinity_to_dead(cases, ALIVE)
    assert (held.claim, held.outcome) == ("SCHED-05", "held")
    waited = {**CASE, "actor_soft=False": {"ok": True, "node": "head"}}
    failed = affinity_to_dead({**cases, "killed worker-2": waited}, ALIVE)
    assert failed.outcome == "failed"
    assert "killed worker-2: actor soft=False must fail with ActorUnschedulableError" in (
        failed.reason
    )
    on_dead = {**CASE, "task_soft=True": {"ok": True, "node": "worker-2(dead)"}}
    assert "task soft=True must run on" in affinity_to_dead({"x": on_dead}, ALIVE).reason
    vague = {
        **CASE,
        "task_soft=False": {
            "ok": False,
            "error": {**CASE["task_soft=False"]["error"], "message": "no"},
        },
    }
    assert "must name the strategy" in affinity_to_dead({"x": vague}, ALIVE).reason


ZERO_HEAD = "Total Usage:\n 0.0/8.0 CPU\n 0B/5.10GiB memory\n"


def test_sched03_a_zero_cpu_head_gets_no_cpu_work() -> None:
    runs = {
        "DEFAULT 8 actors": placement(0, 4, 4),
        "SPREAD 8 actors": placement(0, 4, 4),
        "DEFAULT 8 tasks": placement(0, 4, 4),
    }
    held = zero_cpu_head(runs, ZERO_HEAD, 8)
    assert (held.claim, held.outcome) == ("SCHED-03", "held")
    on_head = zero_cpu_head({**runs, "SPREAD 8 actors": placement(1, 4, 3)}, ZERO_HEAD, 8)
    assert on_head.outcome == "failed"
    assert "SPREAD 8 actors landed on the 0-CPU head" in on_head.reason
    counted = zero_cpu_head(runs, ZERO_HEAD.replace("/8.0", "/12.0"), 8)
    assert "the head adds no CPU to the cluster" in counted.reason
    short = {**runs, "DEFAULT 8 tasks": {**placement(0, 4, 3), "n": 8}}
    assert "DEFAULT 8 tasks: 8 placed" in zero_cpu_head(short, ZERO_HEAD, 8).reason
