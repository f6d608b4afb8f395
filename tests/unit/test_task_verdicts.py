"""TASK-01 … TASK-05's verdicts on records shaped as ``workloads.tasks`` reports them."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import CheckFailed
from experiments.verdicts.tasks import (
    FailureCauseRaceLost,
    NodeKill,
    app_exceptions,
    env_budget,
    node_died_error,
    retried_elsewhere,
    retry_budget,
)

T0 = 1_796_700_000.0
CRASH_ERROR = {
    "type": "WorkerCrashedError",
    "bases": ["RayError", "Exception"],
    "is_RayTaskError": False,
}


def crashed(executions: int) -> dict[str, Any]:
    attempts = [{"state": "FAILED", "error_type": "WORKER_DIED"}] * executions
    return {"executions": executions, "error": CRASH_ERROR, "attempts": attempts, "seconds": 4.2}


RECOVERED = {
    "executions": 3,
    "error": None,
    "value": {"attempt": 3, "node_id": "w1"},
    "attempts": [
        {"state": "FAILED", "error_type": "WORKER_DIED"},
        {"state": "FAILED", "error_type": "WORKER_DIED"},
        {"state": "FINISHED", "error_type": None},
    ],
}


def test_the_retry_budget_holds_and_one_retry_too_many_fails() -> None:
    runs = {"max_retries=2": crashed(3), "default": crashed(4), "two crashes": RECOVERED}
    assert retry_budget(runs, "w1").held
    extra = retry_budget({**runs, "default": crashed(5)}, "w1")
    assert extra.outcome == "failed"
    assert "the default budget: expected 4 executions" in extra.reason
    assert env_budget({"env 1": crashed(2), "env 0": crashed(1), "env 1, max 2": crashed(3)}).held
    ignored = env_budget({"env 1": crashed(4), "env 0": crashed(1), "env 1, max 2": crashed(3)})
    assert "RAY_TASK_MAX_RETRIES=1: expected 2 executions" in ignored.reason


def raised(cause: str, executions: int) -> dict[str, Any]:
    error = {
        "type": f"RayTaskError({cause})",
        "bases": ["RayTaskError", "RayError", cause],
        "is_RayTaskError": True,
    }
    attempts = [{"state": "FAILED", "error_type": "TASK_EXECUTION_EXCEPTION"}] * executions
    return {
        "executions": executions,
        "error": error,
        "attempts": attempts,
        "isinstance_cause": True,
    }


APP_RUNS = {
    "default": raised("AppError", 1),
    "retry 2": raised("AppError", 3),
    "retry default": raised("AppError", 4),
    "unlisted": raised("AppError", 1),
    "listed": raised("ValueError", 3),
    "recovers": {
        "error": None,
        "value": 2,
        "attempts": [
            {"state": "FAILED", "error_type": "TASK_EXECUTION_EXCEPTION"},
            {"state": "FINISHED", "error_type": None},
        ],
    },
}


def test_application_exceptions_retried_only_when_asked() -> None:
    assert app_exceptions(APP_RUNS).held
    retried = app_exceptions({**APP_RUNS, "default": raised("AppError", 4)})
    assert retried.outcome == "failed"
    assert "by default: expected 1 executions" in retried.reason
    not_a_cause = deepcopy(APP_RUNS)
    not_a_cause["listed"]["isinstance_cause"] = False
    assert "must also be a ValueError" in app_exceptions(not_a_cause).reason


NODE_DIED = {
    "error": {
        "type": "NodeDiedError",
        "bases": ["RayError", "Exception"],
        "is_RayTaskError": False,
        "message": "The node with node id: n1 and address: 10.0.0.3 and node name: 10.0.0.3 has been marked dead",
    },
    "attempts": [{"state": "FAILED", "error_type": "NODE_DIED"}],
    "executions": [T0 - 2],
    "t_outcome": T0 + 0.1,
    "failure_cause": [],
}
KILL = NodeKill(NODE_DIED, T0, 4.1, "n1")


def test_node_died_error_before_dead_holds_and_after_it_is_the_race_or_a_failure() -> None:
    assert node_died_error(KILL, "address: 10.0.0.3", 6.5).held
    late_seen = {**NODE_DIED, "t_outcome": T0 + 20.7}
    late = node_died_error(replace(KILL, seen=late_seen), "address: 10.0.0.3", 6.5)
    assert type(late.error()) is CheckFailed  # unexplained: the owner's log says nothing
    assert "no failed question to the raylet" in late.reason
    explained = {
        **late_seen,
        "failure_cause": [{"t": T0 + 20.6, "line": "Failed to fetch worker failure cause"}],
    }
    race = node_died_error(replace(KILL, seen=explained), "address: 10.0.0.3", 6.5)
    assert isinstance(race.error(), FailureCauseRaceLost)
    unnamed = node_died_error(KILL, "address: 10.0.0.9", 6.5)
    assert "must name the node's IP" in unnamed.reason


RETRIED = {
    "error": None,
    "value": {"execution": 2, "node_id": "w3"},
    "attempts": [
        {"state": "FAILED", "error_type": "NODE_DIED"},
        {"state": "FINISHED", "error_type": None},
    ],
    "t_outcome": T0 + 8.0,
}


def test_a_retry_on_the_survivor_in_the_window_holds() -> None:
    assert retried_elsewhere(RETRIED, T0, (0.0, 26.5), "w3").held
    early = retried_elsewhere(RETRIED, T0, (60.0, 86.0), "w3")
    assert early.outcome == "failed"
    assert "window [60.0, 86.0]" in early.reason
    elsewhere = retried_elsewhere(RETRIED, T0, (0.0, 26.5), "w2")
    assert "only live worker" in elsewhere.reason
