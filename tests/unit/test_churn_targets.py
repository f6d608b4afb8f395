"""Where a scheduled strike lands: by role, by pick, never the last healthy worker."""

from __future__ import annotations

from typing import cast

import pytest

from chaos.errors import ChaosError
from chaos.nemesis.churn import Churn, _nodes_of, choose
from chaos.nemesis.host import KillNode
from chaos.nemesis.nemesis import Nemesis
from chaos.nemesis.network import Partition
from chaos.spec.schedule import Role, Schedule, Strike, StrikeKind

WORKERS = ["worker-3", "worker-1", "worker-2"]


def strike(kind: StrikeKind, pick: int, role: Role = Role.WORKER) -> Strike:
    return Strike(0, 1.0, kind, role, pick, 5.0)


def test_the_pick_indexes_the_healthy_workers_sorted_by_name() -> None:
    for pick, expected in [(0, "worker-1"), (1, "worker-2"), (2, "worker-3"), (4, "worker-2")]:
        node, _ = choose(strike(StrikeKind.KILL_NODE, pick), head="head", workers=WORKERS, out=())
        assert node == expected


def test_nodes_out_are_not_candidates_and_one_worker_is_always_left() -> None:
    kill = strike(StrikeKind.KILL_NODE, 0)
    assert choose(kill, head="head", workers=WORKERS, out={"worker-1"})[0] == "worker-2"
    node, why = choose(kill, head="head", workers=WORKERS, out={"worker-1", "worker-2"})
    assert node is None and "leave no healthy worker" in why
    # A worker-process kill takes no node: it may strike the last healthy one.
    process = strike(StrikeKind.KILL_WORKER, 0)
    assert choose(process, head="head", workers=WORKERS, out={"worker-1", "worker-2"}) == (
        "worker-3",
        "",
    )


def test_the_head_only_when_the_strike_says_so() -> None:
    on_head = strike(StrikeKind.KILL_RAYLET, 3, Role.HEAD)
    assert choose(on_head, head="head", workers=WORKERS, out=()) == ("head", "")
    assert choose(on_head, head="head", workers=WORKERS, out={"head"})[0] is None
    assert "head" not in {
        choose(strike(StrikeKind.KILL_NODE, p), head="head", workers=WORKERS, out=())[0]
        for p in range(10)
    }


def test_rpc_failure_strikes_need_a_workload_for_their_driver() -> None:
    schedule = Schedule.build(
        3, kinds=["kill_node"], duration_s=60, interval_s=20, cover=["rpc_failure"]
    )
    with pytest.raises(ChaosError, match="rpc_failure strikes but no workload"):
        Churn(cast("Nemesis", object()), schedule)


def test_a_replacement_finds_the_fault_by_its_node_a_partition_by_its_cut_off_side() -> None:
    assert _nodes_of(Partition([["worker-1"], ["head", "worker-2"]])) == {"worker-1"}
    assert _nodes_of(KillNode("worker-2")) == {"worker-2"}
    assert _nodes_of(object()) == set()
