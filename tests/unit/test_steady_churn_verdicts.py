"""CHURN-01, -02, -09 and -10's verdicts on a steady run's record (no Docker): a lane held
only when it came back exact and a strike reached it; one that came back short, wrong or
gave up fails; one no strike reached cannot decide; the held claims are judged first."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import RPC_PROBE, CheckFailed, MissingEvidence
from experiments.verdicts.steady_churn import (
    JUDGES,
    SteadyRun,
    actor_calls_exact,
    borrowed_objects_exact,
    generator_items_exact,
    held_first,
    proofs,
    tasks_exact,
)

LANES = ("tasks", "actor calls", "generator items", "borrowed objects")


def attempts(causes: dict[str, int], rebuilt: int = 0) -> dict[str, Any]:
    """``workloads.lanes.attempts``' counts (spans left out: the verdicts never read them)."""
    return {"causes": causes, "rebuilt": rebuilt, "retried": sum(causes.values()), "where": {}}


# docs/evidence/churn.md: the counts of 5 December 2026 02:16 UTC (294 tasks, 2180 calls, two
# run twice, 720 generator items, 164 borrowed objects), the hits of 6 December 17:15 (seed
# 5: 1 nested task retried, 1 actor restart, 2 generators re-executed, 2 objects rebuilt).
SENT = {"tasks": 294, "actor calls": 2180, "generator items": 720, "borrowed objects": 164}
SEEN: dict[str, Any] = {
    "sent": SENT,
    "completed": dict(SENT),
    "wrong": {lane: [] for lane in LANES},
    "errors": [],
    "executed": {f"actor-{i % 4}:{i}": 2 if i in (88, 901) else 1 for i in range(2180)},
    "hits": {
        "tasks": {"parents": attempts({"NODE_DIED": 1}), "children": attempts({})},
        "actor calls": {"actors": [{"num_restarts": 1}, {"num_restarts": 0}, {}]},
        "generator items": {
            "generators": attempts({"NODE_DIED": 2}),
            "consumers": attempts({"NODE_DIED": 1}),
        },
        "borrowed objects": {"makers": attempts({}, rebuilt=2), "borrowers": attempts({})},
    },
}
PROBE = {
    "tag": "rpc-1",
    "calls": 4,
    "values": [f"rpc-1:{i}" for i in range(4)],
    "s": 6.69,
    "injected": RPC_PROBE.num_failures,
    "error": None,
}
RUN = SteadyRun(5, SEEN, 2, [PROBE])


def seen_with(**changes: Any) -> dict[str, Any]:
    seen = deepcopy(SEEN)
    seen.update(changes)
    return seen


def test_every_lane_exact_and_reached_holds_with_its_proof() -> None:
    verdicts = [judge(RUN) for judge in JUDGES]
    assert [(v.claim, v.outcome) for v in verdicts] == [
        ("CHURN-01", "held"),
        ("CHURN-02", "held"),
        ("CHURN-09", "held"),
        ("CHURN-10", "held"),
    ]
    assert verdicts[0].reason == (
        "every task came back exact; 2 container strikes landed, 1 nested tasks retried"
    )
    assert verdicts[1].reason == "every actor call came back exact; the actors restarted 1 times"
    assert "every generator item came back exact; 2 streaming" in verdicts[2].reason
    assert "every borrowed object came back exact; 2 lent objects rebuilt" in verdicts[3].reason
    assert list(proofs(RUN)) == list(LANES)


def test_churn01_a_task_lost_wrong_or_given_up_fails() -> None:
    short = tasks_exact(replace(RUN, seen=seen_with(completed={**SENT, "tasks": 293})))
    assert (short.claim, short.outcome) == ("CHURN-01", "failed")
    assert "tasks: 293 of 294 came back" in short.reason
    assert type(short.error()) is CheckFailed
    wrong = seen_with(wrong={**SEEN["wrong"], "tasks": [{"key": 7, "value": 0}]})
    assert "wrong values" in tasks_exact(replace(RUN, seen=wrong)).reason
    gave_up = seen_with(errors=[{"lane": "tasks", "type": "NodeDiedError"}])
    assert "gave up" in tasks_exact(replace(RUN, seen=gave_up)).reason
    # Another lane's error is not this lane's.
    assert actor_calls_exact(replace(RUN, seen=gave_up)).held


def test_churn01_an_rpc_failure_driver_that_departs_fails() -> None:
    failed = tasks_exact(replace(RUN, probes=[{**PROBE, "error": "WorkloadError: …"}]))
    assert failed.outcome == "failed"
    assert "rpc-1: the driver whose pushes failed gave up" in failed.reason
    swapped = tasks_exact(replace(RUN, probes=[{**PROBE, "values": ["rpc-1:1", "rpc-1:0"]}]))
    assert "rpc-1: wrong values" in swapped.reason
    unlogged = tasks_exact(replace(RUN, probes=[{**PROBE, "injected": 1}]))
    assert f"Ray must log {RPC_PROBE.num_failures} injected push failures" in unlogged.reason


def test_churn01_retries_no_container_strike_caused_cannot_decide() -> None:
    # Only the rpc_failure strike landed: the nested retries are no container fault's.
    alone = tasks_exact(replace(RUN, landed=0))
    assert (alone.claim, alone.outcome) == ("CHURN-01", "unknown")
    assert "no strike of seed 5's schedule reached the tasks" in alone.reason
    assert isinstance(alone.error(), MissingEvidence)
    # A retry Ray's memory monitor caused is no strike's doing.
    hits = deepcopy(SEEN["hits"])
    hits["tasks"]["parents"] = attempts({"OUT_OF_MEMORY": 3})
    oom = tasks_exact(replace(RUN, seen=seen_with(hits=hits)))
    assert oom.outcome == "unknown"
    assert "0 nested tasks retried" in oom.reason


def test_churn02_a_call_never_logged_fails_and_no_restart_cannot_decide() -> None:
    executed = dict(list(SEEN["executed"].items())[:-1])
    unlogged = actor_calls_exact(replace(RUN, seen=seen_with(executed=executed)))
    assert (unlogged.claim, unlogged.outcome) == ("CHURN-02", "failed")
    assert "every numbered call runs at least once: 2179 of 2180 logged" in unlogged.reason
    hits = deepcopy(SEEN["hits"])
    hits["actor calls"]["actors"] = [{"num_restarts": 0}, {"num_restarts": None}]
    unhit = actor_calls_exact(replace(RUN, seen=seen_with(hits=hits)))
    assert unhit.outcome == "unknown"
    assert "the actors restarted 0 times" in unhit.reason


def test_churn09_a_missing_item_fails_and_no_re_execution_cannot_decide() -> None:
    short = seen_with(completed={**SENT, "generator items": 712})
    failed = generator_items_exact(replace(RUN, seen=short))
    assert (failed.claim, failed.outcome) == ("CHURN-09", "failed")
    assert "generator items: 712 of 720 came back" in failed.reason
    hits = deepcopy(SEEN["hits"])
    hits["generator items"]["generators"] = attempts({})  # only consumers retried
    unhit = generator_items_exact(replace(RUN, seen=seen_with(hits=hits)))
    assert unhit.outcome == "unknown"
    assert "0 streaming generators re-executed" in unhit.reason


def test_churn10_wrong_bytes_fail_and_no_rebuild_cannot_decide() -> None:
    wrong = seen_with(wrong={**SEEN["wrong"], "borrowed objects": [{"tag": "b-3", "size": 0}]})
    failed = borrowed_objects_exact(replace(RUN, seen=wrong))
    assert (failed.claim, failed.outcome) == ("CHURN-10", "failed")
    assert "borrowed objects: wrong values" in failed.reason
    hits = deepcopy(SEEN["hits"])
    hits["borrowed objects"]["makers"] = attempts({"NODE_DIED": 1}, rebuilt=0)
    unhit = borrowed_objects_exact(replace(RUN, seen=seen_with(hits=hits)))
    assert unhit.outcome == "unknown"
    assert "0 lent objects rebuilt from lineage" in unhit.reason


def test_held_claims_are_judged_first_and_failures_before_the_undecided() -> None:
    hits = deepcopy(SEEN["hits"])
    hits["borrowed objects"]["makers"] = attempts({}, rebuilt=0)
    seen = seen_with(hits=hits, completed={**SENT, "actor calls": 2000})
    ordered = held_first(judge(replace(RUN, seen=seen)) for judge in JUDGES)
    assert [(v.claim, v.outcome) for v in ordered] == [
        ("CHURN-01", "held"),
        ("CHURN-09", "held"),
        ("CHURN-02", "failed"),
        ("CHURN-10", "unknown"),
    ]
