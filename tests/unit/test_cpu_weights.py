"""CPU weights: a node added to a running cluster weighs as its cluster, at least as a boot."""

from __future__ import annotations

from typing import Any

from chaos.cluster.readiness import (
    BOOT_CPU_SHARES,
    DEFAULT_CPU_SHARES,
    JUDGED_CPU_SHARES,
    judging_priority,
    weigh_added,
)


class _Backend:
    def __init__(self) -> None:
        self.weights: dict[str, int] = {}

    def set_cpu_weight(self, node: str, weight: int) -> None:
        self.weights[node] = weight


class _Cluster:
    def __init__(self) -> None:
        self.backend = _Backend()
        self.cpu_shares = DEFAULT_CPU_SHARES
        self.nodes: dict[str, Any] = {"head": object()}


def test_a_node_launched_while_its_cluster_is_judged_weighs_as_the_judged() -> None:
    cluster: Any = _Cluster()
    weigh_added(cluster, "plain-1")  # not judged: a boot's weight
    assert cluster.backend.weights["plain-1"] == BOOT_CPU_SHARES
    judging_priority(cluster, judged=True)
    weigh_added(cluster, "plain-2")  # the autoscaler launched it mid-body
    assert cluster.backend.weights["plain-2"] == JUDGED_CPU_SHARES
    cluster.nodes["plain-2"] = object()
    judging_priority(cluster, judged=False)  # the body ends: every node back to the default
    assert cluster.backend.weights["plain-2"] == DEFAULT_CPU_SHARES
