"""A pod's graceful stop (``TerminateNode``): SIGTERM to the node's blocking ``ray start``,
refused before any signal when nothing blocks; proven by the GCS's draining list."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_nemesis_faults import OK, FakeCluster, nemesis_on

from chaos.backends.base import ExecResult
from chaos.errors import ChaosError

PS_ARGS = """\
    1 Ss   /sbin/docker-init -- /usr/local/bin/raychaos-node-entry ray start --block
    9 Sl   /opt/ray/bin/python /opt/ray/bin/ray start --node-ip-address=10.0.0.11 --block
   42 Sl   /opt/ray/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --head=false
   77 S    python -m raychaos_agent.ready
"""


def cluster_with(argv: tuple[str, ...]) -> FakeCluster:
    cluster = FakeCluster()
    cluster.plan = SimpleNamespace(gcs_address="10.0.0.10:6379")  # type: ignore[attr-defined]
    for node in cluster.nodes.values():
        node.plan = SimpleNamespace(argv=argv)  # type: ignore[attr-defined]
    return cluster


def test_a_node_whose_ray_start_does_not_block_is_refused_before_any_signal() -> None:
    cluster = cluster_with(("ray", "start", "--address=10.0.0.10:6379"))
    with pytest.raises(ChaosError, match="does not block") as raised:
        nemesis_on(cluster).terminate_node("worker-1")
    assert "--block" in (raised.value.hint or "")
    assert cluster.execs == []


def test_sigterm_goes_to_the_blocking_ray_start_and_the_drain_proves_it() -> None:
    cluster = cluster_with(("ray", "start", "--block"))
    signalled: list[list[str]] = []

    def answer(node: str, argv: list[str]) -> ExecResult:
        if argv[0] == "ps":
            return ExecResult(0, PS_ARGS)
        if argv[:2] == ["kill", "-TERM"]:
            signalled.append(argv)
            return OK
        if "raychaos_agent.drain" in argv:
            return ExecResult(0, json.dumps({"id-worker-1": 1_000}) + "\n")
        raise AssertionError(f"unexpected exec {argv}")

    cluster.answer = answer
    fault = nemesis_on(cluster).terminate_node("worker-1")
    assert signalled == [["kill", "-TERM", "9"]]
    assert fault.seen_draining and fault.details["pid"] == 9
    assert fault.takes_down == ("worker-1",)


def test_two_blocking_ray_starts_are_an_error_not_a_guess() -> None:
    cluster = cluster_with(("ray", "start", "--block"))
    twice = PS_ARGS + "   10 Sl   /opt/ray/bin/python /opt/ray/bin/ray start --block\n"
    cluster.answer = lambda node, argv: ExecResult(0, twice) if argv[0] == "ps" else OK
    with pytest.raises(ChaosError, match=r"expected one blocking ray start .*\[9, 10\]"):
        nemesis_on(cluster).terminate_node("worker-1")
