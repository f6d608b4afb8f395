"""CHURN-03, -04 and -05's verdicts on a spot node's recorded life (no Docker): at either end
the lost race is the end's intermittent finding, never a pass; a log that orders nothing
cannot decide; a won race (the notice first) is judged as strictly as ever."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from chaos.testing import CheckFailed, MissingEvidence
from experiments.verdicts.churn import (
    SigkillRetryRaceLost,
    SigtermRetryRaceLost,
    drain_keeps_work_off,
    preemption_is_free,
    recorded_as_preemption,
)

MESSAGE = "raychaos: spot reclaimed"
IDLE = {"accepted": False, "rejection": "The node is no longer idle"}
DURING = {
    "soft": {"error": None, "node_id": "w2"},
    "actor": {"error": None, "node_id": "w3"},
    "hard": {"error": "TaskUnschedulableError"},
    "group": {"ready": False, "state": "PENDING"},
    "victim": {"Alive": True},
}


def test_churn03_a_busy_node_refuses_idle_termination_and_its_drain_keeps_work_off() -> None:
    assert drain_keeps_work_off(IDLE, DURING, "w1").held
    landed = drain_keeps_work_off(IDLE, {**DURING, "soft": {"error": None, "node_id": "w1"}}, "w1")
    assert landed.outcome == "failed"
    assert "soft affinity" in landed.reason
    accepted = drain_keeps_work_off({"accepted": True, "rejection": ""}, DURING, "w1")
    assert "must be refused" in accepted.reason


SEEN: dict[str, Any] = {
    "victim_record": {"DeathReason": 3, "DeathReasonMessage": MESSAGE},
    "victim_state": [{"state_message": f"Terminated due to preemption: {MESSAGE}"}],
    "busy_call": {
        "error": {
            "type": "ActorDiedError",
            "preempted": True,
            "message": f"… the actor's node was preempted: {MESSAGE}",
        }
    },
    "counter_after_kill": {"error": None},
    "counter_row_after_kill": {"num_restarts": 2, "num_restarts_due_to_node_preemption": 1},
    "task": {"error": None, "value": {"execution": 3}},
    "executions": [1, 2, 3],
}
KNEW = {"death_first": True, "error": "NODE_DIED", "free_logged": True}
RACED = {
    "death_first": False,
    "failure_first": True,
    "error": "WORKER_DIED",
    "death_to_failure_s": -0.4,
}


def counted() -> dict[str, Any]:
    seen = deepcopy(SEEN)
    seen["task"] = {"error": {"type": "NodeDiedError"}, "value": None}
    seen["executions"] = [1, 2]
    return seen


def test_churn04_a_preemption_recorded_as_such_holds() -> None:
    assert recorded_as_preemption(SEEN, MESSAGE).held
    plain = deepcopy(SEEN)
    plain["victim_record"]["DeathReason"] = 2
    assert recorded_as_preemption(plain, MESSAGE).outcome == "failed"


def test_churn05_free_retry_holds_and_the_lost_race_is_the_finding_not_a_pass() -> None:
    assert preemption_is_free(SEEN, KNEW, "sigterm").held
    lost = preemption_is_free(counted(), RACED, "sigterm")
    assert lost.outcome == "failed"
    assert isinstance(lost.error(), SigtermRetryRaceLost)
    assert "race lost" in lost.reason


def test_churn05_a_counted_retry_the_log_does_not_explain_fails() -> None:
    unexplained = preemption_is_free(counted(), KNEW, "sigterm")
    assert unexplained.outcome == "failed"
    assert type(unexplained.error()) is CheckFailed
    assert "knew of the death first" in unexplained.reason
    free_anyway = preemption_is_free(SEEN, RACED, "sigterm")  # against Ray's own rule
    assert type(free_anyway.error()) is CheckFailed


def test_churn05_a_log_that_orders_nothing_cannot_decide() -> None:
    unordered = preemption_is_free(counted(), {"error": "NODE_DIED"}, "sigterm")
    assert unordered.outcome == "unknown"
    assert isinstance(unordered.error(), MissingEvidence)


def test_churn05_the_sigkill_ends_race_lost_or_won() -> None:
    """Usually lost (the failure first, the retry counted); once won on 7 December 2026 (CI,
    2.59.0: the notice 8.27 s ahead, the retry free)."""
    lost = preemption_is_free(counted(), {**RACED, "error": "NODE_DIED"}, "sigkill")
    assert isinstance(lost.error(), SigkillRetryRaceLost) and lost.claim == "CHURN-05"
    assert "the sigkill end's race lost" in lost.reason
    won = {
        "death_first": True,
        "error": "NODE_DIED",
        "free_logged": True,
        "death_to_failure_s": 8.267,
    }
    assert preemption_is_free(SEEN, won, "sigkill").held
    assert type(preemption_is_free(counted(), won, "sigkill").error()) is CheckFailed
    assert preemption_is_free(counted(), {"error": "NODE_DIED"}, "sigkill").outcome == "unknown"
