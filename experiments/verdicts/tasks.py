"""TASK-01 … TASK-05 as pure verdicts over what ``workloads.tasks`` reported.

Each run's record: the executions counted, the error the caller got (its type, its bases,
whether it is a ``RayTaskError``, its message), the State API's attempts ``[state,
error_type]``, the value of a successful execution, and the times it reported; for a node
death, when ``ray.nodes()`` showed it dead and the owner's log lines about the failure cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Judging, RaceLost, attempts, verdict

CRASHED = ["FAILED", "WORKER_DIED"]
RAISED = ["FAILED", "TASK_EXECUTION_EXCEPTION"]
#: How far apart the owner's log line saying its question to the dead raylet failed and the
#: workload's NodeDiedError may be: the error follows the line in the same callback
#: (HandleGetWorkerFailureCause → FailOrRetryPendingTask, normal_task_submitter.cc), and
#: the log's stamp is in ms; the rest is the driver's thread waking from ray.get on a loaded
#: host (a margin, not a measurement: the two late runs recorded no such line yet).
CAUSE_TO_ERROR_S = 2.0

Seen = Mapping[str, Any]


class FailureCauseRaceLost(RaceLost):
    """TASK-04's NodeDiedError came after the node was marked DEAD, and the owner's log shows
    why: its question to the dead node's raylet, why the task's worker failed, failed only
    then (FAILURE_CAUSE_RACE in the experiment)."""

    claims: ClassVar[tuple[str, ...]] = ("TASK-04",)


def _crashed(j: Judging, label: str, seen: Seen, executions: int) -> None:
    """The task crashed ``executions`` times and then failed with WorkerCrashedError (a
    system error, not a RayTaskError)."""
    j.require(
        seen["executions"] == executions, f"{label}: expected {executions} executions: {seen}"
    )
    err = j.found(seen["error"], f"{label}: the task must fail once its budget is spent: {seen}")
    j.require(
        err["type"] == "WorkerCrashedError" and err["bases"][:2] == ["RayError", "Exception"],
        f"{label}: WorkerCrashedError, a RayError: {err}",
    )
    j.require(not err["is_RayTaskError"], f"{label}: a worker crash is not a RayTaskError: {err}")
    j.require(
        attempts(seen["attempts"]) == [CRASHED] * executions,
        f"{label}: {executions} crashed attempts: {seen['attempts']}",
    )


@verdict("TASK-01")
def retry_budget(j: Judging, runs: Mapping[str, Seen], worker_id: str) -> str:
    """A SIGKILLed worker's task is retried ``max_retries`` times (Ray's default 3), then
    ``WorkerCrashedError``; a retry that survives returns the task's value. ``runs``:
    ``max_retries=2``, ``default``, ``two crashes`` (max_retries=3, the third succeeds)."""
    _crashed(j, "max_retries=2", runs["max_retries=2"], 3)
    j.measure("TASK-01 3 crashed attempts (s)", runs["max_retries=2"]["seconds"])
    _crashed(j, "the default budget", runs["default"], 4)
    j.measure("TASK-01 4 crashed attempts, default budget (s)", runs["default"]["seconds"])
    seen = runs["two crashes"]
    j.require(seen["error"] is None, f"the third execution must succeed: {seen}")
    j.require(
        seen["value"]["attempt"] == 3 and seen["value"]["node_id"] == worker_id,
        f"the third execution's value: {seen['value']}",
    )
    j.require(
        attempts(seen["attempts"]) == [CRASHED, CRASHED, ["FINISHED", None]],
        f"two crashed attempts, then one finished: {seen['attempts']}",
    )
    return (
        "3 and 4 executions then WorkerCrashedError (max_retries=2, default); a third run returned"
    )


@verdict("TASK-02")
def env_budget(j: Judging, runs: Mapping[str, Seen]) -> str:
    """``RAY_TASK_MAX_RETRIES`` in the driver's environment sets the default budget, and an
    explicit ``max_retries`` wins over it. ``runs``: ``env 1``, ``env 0``, ``env 1, max 2``."""
    _crashed(j, "RAY_TASK_MAX_RETRIES=1", runs["env 1"], 2)
    _crashed(j, "RAY_TASK_MAX_RETRIES=0", runs["env 0"], 1)
    _crashed(j, "RAY_TASK_MAX_RETRIES=1, max_retries=2", runs["env 1, max 2"], 3)
    return "RAY_TASK_MAX_RETRIES=1 and 0 gave 2 and 1 executions; max_retries=2 over it gave 3"


def _raised(j: Judging, label: str, seen: Seen, cause: str, executions: int) -> None:
    """The task raised ``cause`` ``executions`` times; the caller got ``RayTaskError(cause)``,
    which is also a ``cause``."""
    j.require(
        seen["executions"] == executions, f"{label}: expected {executions} executions: {seen}"
    )
    err = j.found(seen["error"], f"{label}: the task must fail: {seen}")
    j.require(
        err["type"] == f"RayTaskError({cause})"
        and err["bases"][:3] == ["RayTaskError", "RayError", cause],
        f"{label}: RayTaskError({cause}): {err}",
    )  # fmt: skip
    j.require(
        bool(err["is_RayTaskError"]) and bool(seen["isinstance_cause"]),
        f"{label}: the error must also be a {cause}",
    )
    j.require(
        attempts(seen["attempts"]) == [RAISED] * executions,
        f"{label}: {executions} raising attempts: {seen['attempts']}",
    )


@verdict("TASK-03")
def app_exceptions(j: Judging, runs: Mapping[str, Seen]) -> str:
    """An application exception is not retried by default; ``retry_exceptions`` (True, or a
    list of types) retries up to ``max_retries`` for those types only; the caller's
    ``RayTaskError`` is-a the cause; a retry that succeeds returns."""
    _raised(j, "by default", runs["default"], "AppError", 1)
    _raised(j, "retry_exceptions, max_retries=2", runs["retry 2"], "AppError", 3)
    _raised(j, "retry_exceptions, the default budget", runs["retry default"], "AppError", 4)
    _raised(j, "a type not listed", runs["unlisted"], "AppError", 1)
    _raised(j, "a listed type", runs["listed"], "ValueError", 3)
    seen = runs["recovers"]
    j.require(seen["error"] is None and seen["value"] == 2, f"the retry must succeed: {seen}")
    j.require(
        attempts(seen["attempts"]) == [RAISED, ["FINISHED", None]],
        f"one raising attempt, then one finished: {seen['attempts']}",
    )
    return "not retried by default; retried as asked, for the listed types only; RayTaskError is-a the cause"


@dataclass(frozen=True)
class NodeKill:
    """A node killed under a task: the record of the task's run, the strike's time, when
    ``ray.nodes()`` showed the node DEAD (seconds after the strike), and the victim's id."""

    seen: Seen
    killed_at: float
    dead_s: float
    node_id: str


@verdict("TASK-04")
def node_died_error(j: Judging, kill: NodeKill, message: str, band_high: float) -> str:
    """Without retries the caller gets ``NodeDiedError`` (a system error, no ``reason``,
    naming the node's IP as ``message`` and its id) at once, before the node is marked DEAD:
    one execution, FAILED with NODE_DIED. A NodeDiedError after DEAD is the intermittent
    finding :class:`FailureCauseRaceLost` when the owner's log shows its question to the dead
    raylet failing at that time (within :data:`CAUSE_TO_ERROR_S`); else a failure."""
    seen = kill.seen
    err = j.found(seen["error"], f"expected NodeDiedError: {seen}")
    j.require(err["type"] == "NodeDiedError", f"expected NodeDiedError: {err}")
    j.require(
        err["bases"][:2] == ["RayError", "Exception"] and not err["is_RayTaskError"]
        and "reason" not in err,
        f"NodeDiedError is a system error without a reason: {err}",
    )  # fmt: skip
    j.require(message in err["message"], f"the error must name the node's IP ({message}): {err}")
    j.require(kill.node_id in err["message"], f"the error must name the node id: {err['message']}")
    j.require(
        attempts(seen["attempts"]) == [["FAILED", "NODE_DIED"]] and len(seen["executions"]) == 1,
        f"one execution, FAILED with NODE_DIED: {seen['attempts']}, {seen['executions']}",
    )
    at = j.found(seen["t_outcome"], "the workload did not report the error's time")
    outcome = j.measure("TASK-04 kill → NodeDiedError (s)", round(at - kill.killed_at, 2))
    if outcome >= kill.dead_s:
        _failure_cause_race(j, kill, outcome)
    j.require(outcome < band_high, f"NodeDiedError after {outcome} s")
    return f"NodeDiedError {outcome} s after the kill, the node DEAD at {kill.dead_s} s"


def _failure_cause_race(j: Judging, kill: NodeKill, outcome: float) -> None:
    """The error came after DEAD: the race lost if the owner's log says so (its failed
    question to the dead raylet, at the error's time); anything else is unexplained."""
    lines = [c for c in kill.seen.get("failure_cause") or [] if c.get("t") is not None]
    j.measure("TASK-04 owner: failure cause not fetched", lines)
    late = f"NodeDiedError ({outcome} s) must come before node death ({kill.dead_s} s)"
    j.require(bool(lines), f"{late}; the owner's log has no failed question to the raylet")
    asked = round(float(lines[-1]["t"]) - kill.killed_at, 2)
    j.require(
        abs(asked - outcome) <= CAUSE_TO_ERROR_S,
        f"{late}; the owner's failed question to the raylet at {asked} s does not explain it",
    )
    j.fail(
        f"NodeDiedError {outcome} s after the kill, after the node's DEAD at {kill.dead_s} s: "
        f"the owner's question to the dead raylet failed only at {asked} s ({lines[-1]['line']})",
        FailureCauseRaceLost,
    )


@verdict("TASK-05")
def retried_elsewhere(
    j: Judging, seen: Seen, killed_at: float, window: tuple[float, float], survivor: str
) -> str:
    """With a retry left (``retry_exceptions=False``) a task whose node died completes on
    another node — the only live one, ``survivor`` — in its second execution, within
    ``window`` seconds of the kill (when the retry can start, plus a fresh worker's start)."""
    j.require(seen["error"] is None, f"the retry must succeed: {seen['error']}")
    j.require(seen["value"]["execution"] == 2, f"the second execution returns: {seen['value']}")
    j.require(
        seen["value"]["node_id"] == survivor,
        f"the retry must run on the only live worker: {seen.get('value_node_name')}",
    )
    j.require(
        attempts(seen["attempts"]) == [["FAILED", "NODE_DIED"], ["FINISHED", None]],
        f"one attempt failed with NODE_DIED, one finished: {seen['attempts']}",
    )
    at = j.found(seen["t_outcome"], "the workload did not report the retry's time")
    completed = j.measure(
        "TASK-05 kill → retry done (s)", round(at - killed_at, 2), band=window, start=killed_at
    )
    j.require(
        window[0] <= completed <= window[1],
        f"retry done {completed} s after the kill, window [{window[0]}, {window[1]}] s",
    )
    return f"the retry done on the survivor {completed} s after the kill"
