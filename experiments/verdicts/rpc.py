"""CHURN-06 and CHURN-07 as pure verdicts: calls whose RPCs failed by Ray's own injection
(``RAY_testing_rpc_failure`` in one driver, ``workloads.rpc``).

The record, one per case: the failure asked for (method, count) and where it lands (request
or reply), the executions the claim allows; the failures Ray logged injecting, by (mode,
method); the call's outcome (``{"value", "error"}``, None when the driver reported none); how
many times it ran (lines its executions wrote on the worker); for an actor call, the outcome
of the actor's next call and how many times that ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Judging, Mode, RpcFailure, verdict

#: What the task and the actor's first call return, and the actor's next call
#: (``workloads.rpc``).
VALUE, NEXT_VALUE = 42, 43
#: The caller's message when an actor call may have run (``ActorUnavailableError``).
MAY_HAVE_RUN = "may or may not have been executed"


@dataclass(frozen=True)
class Case:
    """One driver whose first ``failure.num_failures`` calls of ``failure.method`` lost their
    ``mode`` (request or reply), as the run recorded it."""

    label: str
    failure: RpcFailure
    mode: Mode
    #: How many times the call may run: exactly this many; None: at least once (retried
    #: until it answers).
    runs: int | None
    #: The call's outcome; None when the driver reported none.
    outcome: Mapping[str, Any] | None
    #: The failures Ray logged injecting in the driver, by (mode, method).
    injected: Mapping[tuple[Mode, str], int]
    executions: int
    #: An actor's next call: its outcome (None: not reported) and its executions.
    next_call: Mapping[str, Any] | None = None
    next_executions: int = 0


def named(injected: Mapping[tuple[Mode, str], int]) -> dict[str, int]:
    """Ray's injected failures as ``"<mode> <method>": count`` (JSON keys)."""
    return {f"{mode} {method}": n for (mode, method), n in injected.items()}


def _injected(j: Judging, case: Case) -> Mapping[str, Any]:
    """Ray logged injecting exactly the failures asked for, and the driver reported the
    call's outcome (else the record cannot decide)."""
    asked = case.failure.num_failures
    j.require(
        dict(case.injected) == {(case.mode, case.failure.method): asked},
        f"{case.label}: Ray must log {asked} injected {case.mode} failure(s): "
        f"{named(case.injected)}",
    )
    if case.outcome is None:
        j.unknown(f"{case.label}: the driver reported no outcome of its call")
    return case.outcome


def _returned(outcome: Mapping[str, Any], value: int) -> bool:
    return outcome.get("error") is None and outcome.get("value") == value


@verdict("CHURN-06")
def task_returns(j: Judging, cases: Sequence[Case]) -> str:
    """A task pushed through lost requests, through lost replies, or leased through lost lease
    replies returns its value (``max_retries`` = the failures): it runs exactly as many times
    as each case allows (only a lost push reply runs it again)."""
    for case in cases:
        j.measure(
            f"CHURN-06 {case.label}",
            {
                "outcome": case.outcome,
                "injected": named(case.injected),
                "executions": case.executions,
            },
        )
    for case in cases:
        outcome = _injected(j, case)
        j.require(
            _returned(outcome, VALUE),
            f"{case.label}: the task (max_retries={case.failure.num_failures}) must return "
            f"{VALUE}: {dict(outcome)}",
        )
        j.require(
            case.executions == case.runs,
            f"{case.label}: the task must run {case.runs} time(s), ran {case.executions}",
        )
    return "; ".join(f"{c.label}: returned, ran {c.executions}" for c in cases)


def _first_call(j: Judging, case: Case, outcome: Mapping[str, Any]) -> None:
    """At-least-once with retries (it returned, having run); else at-most-once: the caller
    told it may or may not have run, and it ran exactly ``case.runs`` times."""
    if case.runs is None:
        j.require(_returned(outcome, VALUE), f"{case.label}: {dict(outcome)}")
        j.require(
            case.executions >= 1,
            f"{case.label}: the call returned without running: {case.executions}",
        )
        return
    error = outcome.get("error") or {}
    j.require(
        error.get("type") == "ActorUnavailableError",
        f"{case.label}: the caller must get ActorUnavailableError: {dict(outcome)}",
    )
    j.require(MAY_HAVE_RUN in error.get("message", ""), f"{case.label}: {error}")
    j.require(
        case.executions == case.runs,
        f"{case.label}: the method must run {case.runs} time(s), ran {case.executions}",
    )


@verdict("CHURN-07")
def actor_call_at_most_once(j: Judging, cases: Sequence[Case]) -> str:
    """A fresh actor's first call whose push lost its request or its reply: by default
    (``max_task_retries=0``) the caller gets ActorUnavailableError ("may or may not have been
    executed") and the method ran 0 times (request lost) or once (reply lost); with
    ``max_task_retries=-1`` the call returns. Either way the actor answers its next call,
    which runs once."""
    for case in cases:
        j.measure(
            f"CHURN-07 {case.label}",
            {
                "outcome": case.outcome,
                "next_call": case.next_call,
                "injected": named(case.injected),
                "executions": case.executions,
            },
        )
    for case in cases:
        _first_call(j, case, _injected(j, case))
        following = case.next_call
        if following is None:
            j.unknown(f"{case.label}: the driver reported no outcome of the actor's next call")
        j.require(
            _returned(following, NEXT_VALUE),
            f"{case.label}: the actor must answer its next call: {dict(following)}",
        )
        j.require(
            case.next_executions == 1,
            f"{case.label}: the next call must run once, ran {case.next_executions}",
        )
    return "; ".join(f"{c.label}: ran {c.executions}, the next call answered" for c in cases)
