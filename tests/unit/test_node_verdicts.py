"""NODE-01 … NODE-04's verdicts on what a node death's run records (no Docker)."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import MISSED_HEARTBEATS, Band, MissingEvidence
from experiments.verdicts.nodes import (
    NodeStrike,
    Restart,
    graceful_stop,
    killed_node,
    killed_raylet,
    rejoins_under_a_new_id,
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


def rejoined(how: str, old: str, new: str, dead_s: float, alive_s: float) -> Restart:
    """A restart as docs/evidence/node-level.md records them: the old id DEAD ``dead_s`` after
    the kill, the new one ALIVE ``alive_s`` after the restart (3-7 s seen)."""
    seen = {
        "old_node_id": old,
        "new_node_id": new,
        "same_id": False,
        "ip": "10.0.0.3",
        "old_record": {"Alive": False, "DeathReason": 2},
        "state_api_old": {
            "state": "DEAD",
            "state_message": f"Unexpected termination: {MISSED_HEARTBEATS}",
        },
        "state_api_new": {"state": "ALIVE"},
        "task_on_new": True,
        "t_new_alive_seen": T0 + 8.0 + alive_s,
    }
    return Restart(how, T0, T0 + dead_s, T0 + 8.0, old, new, "10.0.0.3", seen)


RESTARTS = [rejoined("node", "n1", "n1b", 5.8, 3.44), rejoined("raylet", "n2", "n2b", 4.2, 2.17)]


def test_node03_a_restart_under_a_new_id_at_the_same_ip_holds() -> None:
    held = rejoins_under_a_new_id(RESTARTS, BAND)
    assert (held.claim, held.outcome) == ("NODE-03", "held"), held.reason
    measured = {m.name: m.value for m in held.measured}
    assert measured["NODE-03 node kill → node DEAD, ray.nodes() (s)"] == 5.8
    assert measured["NODE-03 raylet: restart → new id ALIVE (s)"] == 2.17


def test_node03_the_same_id_a_live_old_id_or_a_late_death_fails() -> None:
    same = replace(RESTARTS[0], new_id="n1")
    verdict = rejoins_under_a_new_id([same, RESTARTS[1]], BAND)
    assert verdict.outcome == "failed"
    assert "NODE-03 node: the restarted node must have a new id" in verdict.reason
    alive = deepcopy(RESTARTS[1].seen)
    alive["state_api_old"]["state"] = "ALIVE"
    back = rejoins_under_a_new_id([RESTARTS[0], replace(RESTARTS[1], seen=alive)], BAND)
    assert "NODE-03 raylet: State API old id must be DEAD" in back.reason
    late = rejoins_under_a_new_id([replace(RESTARTS[0], dead_seen=T0 + 9.0)], BAND)
    assert "node DEAD 9.0 s after the strike, outside [3.0 s, 6.5 s]" in late.reason
    untimed = rejoins_under_a_new_id([replace(RESTARTS[0], dead_seen=None)], BAND)
    assert "did not report the time" in untimed.reason


def test_node03_no_restart_recorded_cannot_decide() -> None:
    verdict = rejoins_under_a_new_id([], BAND)
    assert verdict.outcome == "unknown"
    assert isinstance(verdict.error(), MissingEvidence)
