"""RPC failures (CHURN-06, CHURN-07): Ray's own injection in a driver, judged against what a
caller is promised about tasks and actor calls.

Each case starts a driver whose ``RAY_testing_rpc_failure`` makes its first calls of one client
method fail (:mod:`chaos.nemesis.rpc`: the name is checked against the release first, and
Ray's log line for each injected failure is the proof). Nothing else in the cluster reads the
value. Two nodes: the head hosts the drivers, ``worker`` (resource ``rpc_target``) runs every
call, so each push crosses the network. Executions are counted from a file on that node, not
through Ray. Workloads: ``workloads.rpc``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from chaos.testing import (
    Cluster,
    Experiment,
    Mode,
    RpcFailure,
    sh,
)

PUSH = "CoreWorkerService.grpc_client.PushTask"
LEASE = "NodeManagerService.grpc_client.RequestWorkerLease"
#: Injected failures per task case (and the task's max_retries: exactly enough to succeed).
FAILS = 2
#: A call's whole wait: a failed push is retried in about a second on this machine (4-5 s
#: seen for one lost request, most of it the new worker's start).
CALL_S = 60.0
TOPOLOGY: dict[str, Any] = {
    "driver": False,
    "head": {"num_cpus": 0},
    "workers": [{"name": "worker", "count": 1, "num_cpus": 2, "resources": {"rpc_target": 4}}],
}
RUNS_ON = "worker"
RECORDS = "/tmp/raychaos-executions"
#: The marker of every experiment here (typed once: a marker built from a dict of Any
#: keyword arguments reads as an untyped decorator to mypy).
ON_TOPOLOGY: pytest.MarkDecorator = pytest.mark.cluster(**TOPOLOGY)


def executions(cluster: Cluster, token: str) -> int:
    """How many times the call ``token`` ran (lines its executions wrote on the worker)."""
    lines = sh(cluster, RUNS_ON, f"cat {RECORDS}/{token} 2>/dev/null || true", timeout=15)
    return len(lines.split())


def strike(
    experiment: Experiment, failure: RpcFailure, workload: str, **kwargs: Any
) -> tuple[dict[str, Any], Counter[tuple[Mode, str]], Any]:
    """Run ``workload`` as a driver whose calls fail as ``failure`` says: its ``outcome``, the
    failures Ray logged injecting, and the driver's run."""
    cluster = experiment.cluster
    fault = experiment.nemesis.rpc_failures(
        cluster.driver.name, [failure], f"workloads.rpc:{workload}", timeout_s=CALL_S, **kwargs
    )
    assert fault.run is not None
    fault.run.result(timeout=2 * CALL_S + 60)
    outcome = fault.run.last("outcome").fields
    return outcome, fault.injected(cluster), fault.run


@pytest.mark.claim("CHURN-06")
@ON_TOPOLOGY
def test_a_task_whose_rpcs_fail_returns(experiment: Experiment) -> None:
    """A task pushed through lost requests, then through lost replies, then leased through
    lost lease replies: each returns; only a lost reply runs it again."""
    cases = (
        ("push request lost", RpcFailure(PUSH, FAILS, request_pct=100), Mode.REQUEST, 1),
        ("push reply lost", RpcFailure(PUSH, FAILS, response_pct=100), Mode.RESPONSE, 1 + FAILS),
        ("lease reply lost", RpcFailure(LEASE, FAILS, response_pct=100), Mode.RESPONSE, 1),
    )
    for index, (label, failure, mode, runs) in enumerate(cases):
        token = f"task-{index}"
        outcome, injected, _ = strike(experiment, failure, "task", token=token, max_retries=FAILS)
        ran = executions(experiment.cluster, token)
        experiment.measure(
            f"CHURN-06 {label}",
            {"outcome": outcome, "injected": dict(_named(injected)), "executions": ran},
        )
        assert injected == {(mode, failure.method): FAILS}, (
            f"{label}: Ray must log {FAILS} injected {mode} failures: {dict(_named(injected))}"
        )
        assert outcome["error"] is None and outcome["value"] == 42, (
            f"{label}: the task (max_retries={FAILS}) must return 42: {outcome}"
        )
        assert ran == runs, f"{label}: the task must run {runs} time(s), ran {ran}"


@pytest.mark.claim("CHURN-07")
@ON_TOPOLOGY
def test_an_actor_call_whose_push_fails_is_at_most_once(experiment: Experiment) -> None:
    """A fresh actor's first call loses its push request, or its reply: by default the caller
    is told it may or may not have run, and it ran at most once; with retries it returns."""
    cases = (
        ("request lost, max_task_retries=0", Mode.REQUEST, 0, 0),
        ("reply lost, max_task_retries=0", Mode.RESPONSE, 0, 1),
        ("reply lost, max_task_retries=-1", Mode.RESPONSE, -1, None),
    )
    for index, (label, mode, retries, runs) in enumerate(cases):
        token = f"actor-{index}"
        pct = {"request_pct": 100} if mode is Mode.REQUEST else {"response_pct": 100}
        failure = RpcFailure(PUSH, 1, **pct)
        outcome, injected, run = strike(
            experiment, failure, "actor_call", token=token, max_task_retries=retries
        )
        following = run.last("next_call").fields
        ran = executions(experiment.cluster, token)
        experiment.measure(
            f"CHURN-07 {label}",
            {
                "outcome": outcome,
                "next_call": following,
                "injected": dict(_named(injected)),
                "executions": ran,
            },
        )
        assert injected == {(mode, PUSH): 1}, f"{label}: one injected {mode} failure: {injected}"
        if runs is None:
            # At-least-once: retried until it answers.
            assert outcome["error"] is None and outcome["value"] == 42, f"{label}: {outcome}"
            assert ran >= 1, f"{label}: the call returned without running: {ran}"
        else:
            error = outcome["error"] or {}
            assert error.get("type") == "ActorUnavailableError", (
                f"{label}: the caller must get ActorUnavailableError: {outcome}"
            )
            assert "may or may not have been executed" in error.get("message", ""), error
            assert ran == runs, f"{label}: the method must run {runs} time(s), ran {ran}"
        assert following["error"] is None and following["value"] == 43, (
            f"{label}: the actor must answer its next call: {following}"
        )
        assert executions(experiment.cluster, f"{token}-next") == 1


def _named(injected: Counter[tuple[Mode, str]]) -> dict[str, int]:
    return {f"{mode} {method}": n for (mode, method), n in injected.items()}
