"""CHURN-08's verdict on what a SIGTERM to two blocking ``ray start`` processes recorded (no
Docker): the runs of docs/evidence/churn.md hold whichever way the busy node's death was
recorded; a node not drained, a quiet node that ends late or as a plain stop, or a busy node
that ends early fails; a record without the GCS's end time cannot decide."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import SIGTERM_MESSAGE, MissingEvidence
from experiments.verdicts.sigterm import Terminated, drains_before_it_ends

T0 = 1_796_800_000.0
TIMEOUT_S = 15.0
QUIET = Terminated(T0, True, T0 + 15.0)
BUSY = Terminated(T0 + 1.0, True, T0 + 16.0)
# Run 1 of 5 December 2026: quiet DEAD 7.47 s after its SIGTERM, 0.003 s after its task
# ended; busy 15.05 s after its own, recorded as an expected termination.
SEEN: dict[str, Any] = {
    "ids": {"quiet": "q1", "busy": "b1"},
    "task": {"error": None, "value": {"node_id": "q1", "execution": 1, "t": T0 + 7.467}},
    "call": {"error": {"type": "ActorDiedError", "preempted": False}},
    "records": {
        "quiet": {"Alive": False, "DeathReason": 3, "DeathReasonMessage": SIGTERM_MESSAGE},
        "busy": {"Alive": False, "DeathReason": 1, "DeathReasonMessage": "received SIGTERM"},
    },
    "states": {
        "quiet": [
            {
                "end_time_ms": (T0 + 7.47) * 1000,
                "state_message": f"Terminated due to preemption: {SIGTERM_MESSAGE}",
            }
        ],
        "busy": [
            {
                "end_time_ms": (T0 + 1.0 + 15.05) * 1000,
                "state_message": "Expected termination: received SIGTERM",
            }
        ],
    },
    "executions": [1],
}


def test_churn08_both_drained_quiet_ends_idle_busy_at_the_timeout_holds() -> None:
    held = drains_before_it_ends(SEEN, QUIET, BUSY, TIMEOUT_S)
    assert (held.claim, held.outcome) == ("CHURN-08", "held"), held.reason
    measured = {m.name: m.value for m in held.measured}
    assert measured["CHURN-08 SIGTERM → DEAD in the GCS (s)"] == {"quiet": 7.47, "busy": 15.05}
    assert measured["CHURN-08 busy: death recorded as"]["DeathReason"] == 1
    # The busy node's record is measured, not judged: run 4's preemption holds as well.
    preempted = deepcopy(SEEN)
    preempted["records"]["busy"].update(DeathReason=3, DeathReasonMessage=SIGTERM_MESSAGE)
    assert drains_before_it_ends(preempted, QUIET, BUSY, TIMEOUT_S).held


def test_churn08_a_node_not_listed_as_draining_fails() -> None:
    verdict = drains_before_it_ends(SEEN, QUIET, replace(BUSY, seen_draining=False), TIMEOUT_S)
    assert verdict.outcome == "failed"
    assert "the GCS must list both as draining" in verdict.reason


def test_churn08_the_quiet_node_late_or_recorded_as_a_plain_stop_fails() -> None:
    late = deepcopy(SEEN)
    late["states"]["quiet"][0]["end_time_ms"] = (T0 + 15.2) * 1000
    assert "ends before the 15 s timeout" in drains_before_it_ends(late, QUIET, BUSY, 15.0).reason
    stopped = deepcopy(SEEN)
    stopped["records"]["quiet"].update(DeathReason=1, DeathReasonMessage="received SIGTERM")
    verdict = drains_before_it_ends(stopped, QUIET, BUSY, TIMEOUT_S)
    assert "as its preemption drain (3)" in verdict.reason
    lost = deepcopy(SEEN)
    lost["task"] = {"error": {"type": "NodeDiedError"}, "value": None}
    assert "survives its node's drain" in drains_before_it_ends(lost, QUIET, BUSY, 15.0).reason


def test_churn08_a_busy_node_ended_before_the_timeout_fails() -> None:
    early = deepcopy(SEEN)
    early["states"]["busy"][0]["end_time_ms"] = (T0 + 1.0 + 7.0) * 1000
    verdict = drains_before_it_ends(early, QUIET, BUSY, TIMEOUT_S)
    assert verdict.outcome == "failed"
    assert "ends at the 15 s timeout" in verdict.reason


def test_churn08_a_node_without_the_gcs_end_time_cannot_decide() -> None:
    missing = deepcopy(SEEN)
    missing["states"]["busy"] = []  # was a raw IndexError
    verdict = drains_before_it_ends(missing, QUIET, BUSY, TIMEOUT_S)
    assert verdict.outcome == "unknown"
    assert isinstance(verdict.error(), MissingEvidence)
    assert "no end time for the busy node" in verdict.reason
