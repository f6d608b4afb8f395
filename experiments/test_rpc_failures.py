"""RPC failures (CHURN-06, CHURN-07): Ray's own injection in a driver, judged against what a
caller is promised about tasks and actor calls.

Each case starts a driver whose ``RAY_testing_rpc_failure`` makes its first calls of one client
method fail (:mod:`chaos.nemesis.rpc`: the name is checked against the release first, and
Ray's log line for each injected failure is the proof). Nothing else in the cluster reads the
value. Two nodes: the head hosts the drivers, ``worker`` (resource ``rpc_target``) runs every
call, so each push crosses the network. Executions are counted from a file on that node, not
through Ray. Workloads: ``workloads.rpc``; the verdicts: ``verdicts.rpc``.
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
    WorkloadRun,
    sh,
)

from .verdicts.rpc import Case, actor_call_at_most_once, task_returns

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
) -> tuple[WorkloadRun, Counter[tuple[Mode, str]]]:
    """Run ``workload`` as a driver whose calls fail as ``failure`` says, to its end: the
    driver's run, and the failures Ray logged injecting."""
    cluster = experiment.cluster
    fault = experiment.nemesis.rpc_failures(
        cluster.driver.name, [failure], f"workloads.rpc:{workload}", timeout_s=CALL_S, **kwargs
    )
    assert fault.run is not None
    fault.run.result(timeout=2 * CALL_S + 60)
    return fault.run, fault.injected(cluster)


def reported(run: WorkloadRun, kind: str) -> dict[str, Any] | None:
    """The fields of the driver's latest ``kind`` event; None when it reported none (the
    verdict then cannot decide)."""
    found = run.events(kind)
    return dict(found[-1].fields) if found else None


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
    recorded = []
    for index, (label, failure, mode, runs) in enumerate(cases):
        token = f"task-{index}"
        run, injected = strike(experiment, failure, "task", token=token, max_retries=FAILS)
        ran = executions(experiment.cluster, token)
        recorded.append(
            Case(label, failure, mode, runs, reported(run, "outcome"), injected, executions=ran)
        )
    experiment.judge(task_returns(recorded))


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
    recorded = []
    for index, (label, mode, retries, runs) in enumerate(cases):
        token = f"actor-{index}"
        pct = {"request_pct": 100} if mode is Mode.REQUEST else {"response_pct": 100}
        failure = RpcFailure(PUSH, 1, **pct)
        run, injected = strike(
            experiment, failure, "actor_call", token=token, max_task_retries=retries
        )
        recorded.append(
            Case(
                label,
                failure,
                mode,
                runs,
                reported(run, "outcome"),
                injected,
                executions=executions(experiment.cluster, token),
                next_call=reported(run, "next_call"),
                next_executions=executions(experiment.cluster, f"{token}-next"),
            )
        )
    experiment.judge(actor_call_at_most_once(recorded))
