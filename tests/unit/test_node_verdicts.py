"""NODE-01, NODE-02 and NODE-04's verdicts on what a node death's run records (no Docker)."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chaos.testing import MISSED_HEARTBEATS, Band

if TYPE_CHECKING:
    # The suite installs as chaos.experiments through the editable install's import hook, which
    # mypy cannot follow; it checks the same modules as experiments/.
    from experiments.verdicts.nodes import NodeStrike, graceful_stop, killed_node, killed_raylet
else:
    from chaos.experiments.verdicts.nodes import (
        NodeStrike,
        graceful_stop,
        killed_node,
        killed_raylet,
    )

T0 = 1_796_600_000.0
BAND = Band(3.0, 6.5, "FAST_HEALTH_CHECKS")
SEEN: dict[str, Any] = {
    "dead": True,
    "t_dead_seen": T0 + 4.2,
    "t_task_outcome": T0 + 4.4,
    "t_actor_final": T0 + 4.6,
    "ray_nodes_record": {"Alive": False, "DeathReason": 2, "DeathReasonMessage": MISSED_HEARTBEATS},
    "state_api_node": {
        "state": "DEAD",
        "state_message": f"Unexpected termination: {MISSED_HEARTBEATS}",
        "end_time_ms": (T0 + 4.1) * 1000,
    },
    "task_error": {"type": "NodeDiedError"},
    "task_attempts": [{"state": "FAILED", "error_type": "NODE_DIED"}],
    "actor_errors": [{"type": "GetTimeoutError"}, {"type": "ActorDiedError"}],
    "actor_state_api": {"death_cause": {"actor_died_error_context": {"reason": "NODE_DIED"}}},
}
KILLED = NodeStrike("NODE-01 node kill", T0, SEEN, ["marked dead … 10.0.0.3"], True)


def test_a_node_failure_as_ray_documents_it_holds() -> None:
    held = killed_node(KILLED, BAND)
    assert held.held, held.reason
    assert killed_raylet(replace(KILLED, label="NODE-02 raylet kill"), BAND).claim == "NODE-02"


def test_a_late_death_an_unpushed_error_or_a_retried_task_fails() -> None:
    late = replace(KILLED, seen={**SEEN, "t_dead_seen": T0 + 9.0})
    verdict = killed_node(late, BAND)
    assert verdict.outcome == "failed"
    assert "outside [3.0 s, 6.5 s]" in verdict.reason
    assert "no 'marked dead' error" in killed_node(replace(KILLED, pushed=[]), BAND).reason
    retried = deepcopy(SEEN)
    retried["task_attempts"].append({"state": "FINISHED", "error_type": None})
    assert "one attempt" in killed_node(replace(KILLED, seen=retried), BAND).reason


def test_a_graceful_stop_is_expected_termination_without_a_pushed_error() -> None:
    stopped = deepcopy(SEEN)
    stopped["ray_nodes_record"].update(DeathReason=1, DeathReasonMessage="received SIGTERM")
    stopped["state_api_node"]["state_message"] = "Expected termination: received SIGTERM"
    strike = NodeStrike("NODE-04 ray stop", T0, stopped, [], True)
    assert graceful_stop(strike, BAND, T0 + 4.0).held
    pushed = graceful_stop(replace(strike, pushed=["marked dead"]), BAND, T0 + 4.0)
    assert "pushed an error" in pushed.reason
    as_failure = graceful_stop(replace(strike, seen=SEEN), BAND, T0 + 4.0)
    assert "EXPECTED_TERMINATION" in as_failure.reason
