"""Step titles a platform team reads without the code, and steps that never change an outcome."""

from __future__ import annotations

import pytest

from chaos.nemesis.base import Fault, Together, describe
from chaos.nemesis.exhaustion import FillDisk, MemoryPressure
from chaos.nemesis.host import KillNode, PauseNode, RestartNode, StopNode
from chaos.nemesis.network import Degrade, Partition
from chaos.nemesis.process import KillGcs, KillRaylet, KillWorker
from chaos.plugin.factory import describe_spec
from chaos.spec.topology import ClusterSpec, NodeSpec
from chaos.steps import mark, seconds, short, step


def _raylet() -> KillRaylet:
    fault = KillRaylet("worker-2")
    fault.pid = 4242  # what prepare() finds in the node
    return fault


def _gcs() -> KillGcs:
    fault = KillGcs()
    fault.node, fault.pid = "head", 77
    return fault


@pytest.mark.parametrize(
    ("fault", "title"),
    [
        (KillNode("worker-1"), "kill node worker-1 (SIGKILL)"),
        (StopNode("worker-1"), "stop Ray on worker-1 (ray stop: SIGTERM, then SIGKILL)"),
        (RestartNode("head"), "restart node head (new Ray node id)"),
        (PauseNode("worker-3"), "pause node worker-3 (every process frozen)"),
        (KillWorker("worker-1", 116), "kill process 116 on worker-1 (SIGKILL)"),
        (_raylet(), "kill the raylet of worker-2 (SIGKILL, pid 4242)"),
        (_gcs(), "kill the GCS on head (SIGKILL, pid 77)"),
        (
            Partition([["head", "driver"], ["worker-1"]]),
            "partition the network head,driver | worker-1 (iptables)",
        ),
        (MemoryPressure("worker-1", 2**30), "fill the memory of worker-1 (1,073,741,824 bytes)"),
        (FillDisk("worker-1", "/spill/x", 0.9), "fill the disk of worker-1 (/spill/x to 90%)"),
        (
            Together(KillNode("worker-1"), PauseNode("worker-2")),
            "kill node worker-1 (SIGKILL) + pause node worker-2 (every process frozen)",
        ),
    ],
)
def test_faults_read_as_what_they_do(fault: Fault, title: str) -> None:
    assert describe(fault) == title


def test_a_fault_of_ones_own_reads_by_its_kind() -> None:
    degrade = Degrade("worker-1", delay_ms=100)
    assert describe(degrade).startswith("degrade the network of worker-1 (")


def test_clusters_read_as_their_nodes() -> None:
    spec = ClusterSpec(workers=(NodeSpec(name="worker", count=3),), gcs_ft="redis")
    assert describe_spec(spec) == "head + 3 workers + driver, Ray 2.60.0, GCS FT redis"
    one = ClusterSpec(workers=(NodeSpec(name="worker", count=1),), driver=False)
    assert describe_spec(one) == "head + 1 worker, Ray 2.60.0"


def test_a_step_never_changes_what_the_block_does() -> None:
    """Without an Allure listener (this run has no --alluredir) steps are no-ops."""
    with step("wait: x ≤ 5 s"):
        value = 1
    assert value == 1
    error = AssertionError("not yet")
    with pytest.raises(AssertionError) as caught, step("check: it holds"):
        raise error
    assert caught.value is error
    mark("workload: start x")


def test_titles_stay_short() -> None:
    assert seconds(42) == "42 s" and seconds(2.5) == "2.5 s" and seconds(180.0) == "180 s"
    assert short("a\n  b") == "a b"
    assert short("x" * 300, 10) == "x" * 9 + "…"
