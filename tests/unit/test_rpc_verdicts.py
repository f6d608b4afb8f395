"""CHURN-06 and CHURN-07's verdicts on what Ray's RPC failure injection recorded (no Docker):
the counts of docs/evidence/churn.md hold, a call run too often or a failure never injected
fails, and a driver that reported no outcome cannot decide (never a raw error)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from chaos.testing import MissingEvidence, Mode, RpcFailure
from experiments.verdicts.rpc import Case, actor_call_at_most_once, task_returns

PUSH = "CoreWorkerService.grpc_client.PushTask"
LEASE = "NodeManagerService.grpc_client.RequestWorkerLease"
RETURNED = {"value": 42, "error": None, "s": 2.0}
UNAVAILABLE = {
    "value": None,
    "error": {
        "type": "ActorUnavailableError",
        "message": "The actor is temporarily unavailable: … The task may or may not have been "
        "executed on the actor.",
    },
    "s": 2.0,
}
NEXT = {"value": 43, "error": None, "s": 0.1}


def task_case(label: str, failure: RpcFailure, mode: Mode, runs: int, ran: int) -> Case:
    injected = Counter({(mode, failure.method): failure.num_failures})
    return Case(label, failure, mode, runs, RETURNED, injected, executions=ran)


# docs/evidence/churn.md, 4 December 2026 (3 runs, each the same counts).
TASKS = [
    task_case("push request lost", RpcFailure(PUSH, 2, request_pct=100), Mode.REQUEST, 1, 1),
    task_case("push reply lost", RpcFailure(PUSH, 2, response_pct=100), Mode.RESPONSE, 3, 3),
    task_case("lease reply lost", RpcFailure(LEASE, 2, response_pct=100), Mode.RESPONSE, 1, 1),
]


def actor_case(label: str, mode: Mode, runs: int | None, outcome: dict[str, Any], ran: int) -> Case:
    pct = {"request_pct": 100} if mode is Mode.REQUEST else {"response_pct": 100}
    failure = RpcFailure(PUSH, 1, **pct)
    injected = Counter({(mode, PUSH): 1})
    return Case(label, failure, mode, runs, outcome, injected, ran, NEXT, next_executions=1)


ACTORS = [
    actor_case("request lost, max_task_retries=0", Mode.REQUEST, 0, UNAVAILABLE, 0),
    actor_case("reply lost, max_task_retries=0", Mode.RESPONSE, 1, UNAVAILABLE, 1),
    actor_case("reply lost, max_task_retries=-1", Mode.RESPONSE, None, RETURNED, 2),
]


def test_churn06_each_task_returns_and_runs_as_the_case_allows() -> None:
    held = task_returns(TASKS)
    assert (held.claim, held.outcome) == ("CHURN-06", "held"), held.reason
    assert [m.name for m in held.measured] == [f"CHURN-06 {c.label}" for c in TASKS]
    assert held.measured[1].value["injected"] == {f"response {PUSH}": 2}


def test_churn06_a_lost_request_run_twice_or_a_failure_not_injected_fails() -> None:
    twice = task_returns([replace(TASKS[0], executions=2), *TASKS[1:]])
    assert twice.outcome == "failed"
    assert "push request lost: the task must run 1 time(s), ran 2" in twice.reason
    assert len(twice.measured) == 3  # every case's record reaches the report
    missed = task_returns([*TASKS[:2], replace(TASKS[2], injected=Counter())])
    assert "lease reply lost: Ray must log 2 injected response failure(s)" in missed.reason
    errored = {"value": None, "error": {"type": "WorkerCrashedError"}}
    lost = task_returns([replace(TASKS[0], outcome=errored)])
    assert "must return 42" in lost.reason


def test_churn06_a_driver_that_reported_no_outcome_cannot_decide() -> None:
    verdict = task_returns([replace(TASKS[0], outcome=None)])
    assert verdict.outcome == "unknown"
    assert isinstance(verdict.error(), MissingEvidence)
    assert "reported no outcome" in verdict.reason


def test_churn07_at_most_once_by_default_and_retried_with_retries() -> None:
    held = actor_call_at_most_once(ACTORS)
    assert (held.claim, held.outcome) == ("CHURN-07", "held"), held.reason
    assert held.measured[0].value["next_call"] == NEXT


def test_churn07_a_lost_reply_run_twice_or_a_silent_error_fails() -> None:
    twice = actor_call_at_most_once([ACTORS[0], replace(ACTORS[1], executions=2)])
    assert twice.outcome == "failed"
    assert "the method must run 1 time(s), ran 2" in twice.reason
    plain = {"value": None, "error": {"type": "ActorUnavailableError", "message": "gone"}}
    unsure = actor_call_at_most_once([replace(ACTORS[0], outcome=plain)])
    assert "gone" in unsure.reason
    died = {"value": None, "error": {"type": "ActorDiedError", "message": ""}}
    assert (
        "must get ActorUnavailableError"
        in actor_call_at_most_once([replace(ACTORS[1], outcome=died)]).reason
    )
    never = actor_call_at_most_once([replace(ACTORS[2], executions=0)])
    assert "returned without running" in never.reason
    silent = actor_call_at_most_once([replace(ACTORS[0], next_call={"value": None, "error": {}})])
    assert "must answer its next call" in silent.reason
    rerun = actor_call_at_most_once([replace(ACTORS[0], next_executions=2)])
    assert "the next call must run once, ran 2" in rerun.reason


def test_churn07_a_missing_next_call_event_cannot_decide() -> None:
    """The run that raised IndexError on ``run.events("next_call")[-1]``: now unknown."""
    verdict = actor_call_at_most_once([ACTORS[0], replace(ACTORS[1], next_call=None)])
    assert verdict.outcome == "unknown"
    assert isinstance(verdict.error(), MissingEvidence)
    assert (
        "reply lost, max_task_retries=0: the driver reported no outcome of the actor's next call"
        in (verdict.reason)
    )
    assert len(verdict.measured) == 2  # what was recorded still reaches the report
