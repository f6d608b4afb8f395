"""AUTOSCALE-01 … AUTOSCALE-09's verdicts on records shaped as the harness's autoscaler bridge
and ``workloads.autoscale`` report them (numbers from docs/evidence/autoscale.md; no Docker)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chaos.testing import CheckFailed, MissingEvidence
from experiments.verdicts.autoscale import (
    PENDING_GROUP_LINE,
    AutoscalerKill,
    BrokenType,
    Capped,
    Demand,
    Infeasible,
    PendingGroup,
    broken_type_reported,
    caps_hold,
    demand_fits_its_type,
    idle_node_removed,
    infeasible_reported,
    killed_autoscaler_stays_dead,
    min_workers_replaced,
    pending_group_placed,
    report_time,
    request_holds_until_released,
)

T0 = 1_796_900_000.0
#: The experiment's windows (test_autoscale.py): LAUNCH_S, IDLE_S and its removal bound,
#: the replacement's bound (cleanup interval + LAUNCH_S).
LAUNCH_S = 20.0
IDLE_WINDOW = (6.0, 21.0)
REPLACE_S = 29.5


def launch(t: float, node: str, node_type: str, node_id: str) -> dict[str, Any]:
    return {
        "t": t,
        "kind": "autoscaler_launched",
        "node": node,
        "node_type": node_type,
        "node_id": node_id,
    }


def ran(node: str, node_type: str, start: float) -> dict[str, Any]:
    value = {"node": node, "node_type": node_type, "start": start, "end": start + 3}
    return {"value": value, "error": None, "s": 3.1}


# -- AUTOSCALE-01 --------------------------------------------------------------------------
# Run D: the first launch 0.84 s after the demand, both tasks on tagged-1 one after the other.
DEMAND = Demand(
    submitted=T0,
    launched=[
        launch(T0 + 0.84, "tagged-1", "tagged", "n1"),
        launch(T0 + 1.9, "tagged-2", "tagged", "n2"),
    ],
    outcomes=[ran("tagged-1", "tagged", T0 + 6), ran("tagged-1", "tagged", T0 + 9)],
    refused=[],
)


def test_autoscale01_demand_launches_only_the_type_that_fits() -> None:
    held = demand_fits_its_type(DEMAND, LAUNCH_S)
    assert held.outcome == "held", held.reason
    assert held.claim == "AUTOSCALE-01"
    assert "0.84 s after the demand" in held.reason
    window = held.measured[0]
    assert (window.name, window.value, window.band) == (
        "AUTOSCALE-01 demand to launch (s)",
        0.84,
        (0.0, LAUNCH_S),
    )
    assert window.end == T0 + 0.84
    assert [m.name for m in held.measured[1:]] == ["AUTOSCALE-01 launched", "AUTOSCALE-01 ran on"]


def test_autoscale01_a_plain_node_a_failed_task_or_a_refusal_fails() -> None:
    plain = [*DEMAND.launched, launch(T0 + 3, "plain-1", "plain", "n3")]
    failed = demand_fits_its_type(replace(DEMAND, launched=plain), LAUNCH_S)
    assert failed.outcome == "failed"
    assert "only tagged nodes fit" in failed.reason
    off = [ran("tagged-1", "tagged", T0 + 6), ran("tagged-9", "tagged", T0 + 6)]
    assert (
        "ran off the launched nodes"
        in demand_fits_its_type(replace(DEMAND, outcomes=off), LAUNCH_S).reason
    )
    broke = [{"value": None, "error": {"type": "TaskCancelledError"}}]
    assert "a task failed" in demand_fits_its_type(replace(DEMAND, outcomes=broke), LAUNCH_S).reason
    refused = replace(DEMAND, refused=[{"t": T0 + 2, "node_type": "tagged"}])
    assert "beyond the caps" in demand_fits_its_type(refused, LAUNCH_S).reason
    assert (
        "no node was launched"
        in demand_fits_its_type(replace(DEMAND, launched=[]), LAUNCH_S).reason
    )


# -- AUTOSCALE-02 --------------------------------------------------------------------------
# Run B's wishes: b fills the cluster's cap first; a comes once a b node is idle.
CAPPED = Capped(
    over_time=[
        [0, {}],
        [13.8, {"b": 1}],
        [14.8, {"b": 2}],
        [34.1, {"b": 1, "a": 1}],
        [40.5, {"a": 1}],
    ],
    pending={
        "lines": [
            "{'CPU': 1.0, 'a': 1.0}: 3+ pending tasks/actors",
            "{'CPU': 1.0, 'b': 1.0}: 3+ pending tasks/actors",
        ],
        "status": "…",
    },
    launched=3,
    refused=[],
    outcomes=[ran("b-1", "b", T0)] * 3 + [ran("a-1", "a", T0 + 30)] * 3,
)


def test_autoscale02_the_caps_hold_and_the_rest_stays_pending() -> None:
    held = caps_hold(CAPPED, {"a": 1}, 2)
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-02"
    assert "peak 2 workers" in held.reason
    assert [m.name for m in held.measured] == [
        "AUTOSCALE-02 workers over time (s, by type)",
        "AUTOSCALE-02 pending demands",
    ]


def test_autoscale02_a_wish_over_a_cap_an_unfilled_cap_or_no_listing_fails() -> None:
    over_a = replace(CAPPED, over_time=[*CAPPED.over_time, [41.0, {"a": 2}]])
    failed = caps_hold(over_a, {"a": 1}, 2)
    assert failed.outcome == "failed"
    assert "41.0 s: type a over its max_workers 1" in failed.reason
    over_all = replace(CAPPED, over_time=[[0, {}], [5.0, {"b": 2, "a": 1}]])
    assert "over the cluster's max_workers 2" in caps_hold(over_all, {"a": 1}, 2).reason
    short = replace(CAPPED, over_time=[[0, {}], [5.0, {"b": 1}]])
    assert "peak 1" in caps_hold(short, {"a": 1}, 2).reason
    unlisted = replace(CAPPED, pending={"lines": [], "status": "(no resource demands)"})
    assert "no pending demand" in caps_hold(unlisted, {"a": 1}, 2).reason
    assert "launched nothing" in caps_hold(replace(CAPPED, launched=0), {"a": 1}, 2).reason


def test_autoscale02_launches_without_a_recorded_wish_cannot_be_judged() -> None:
    unknown = caps_hold(replace(CAPPED, over_time=[]), {"a": 1}, 2)
    assert unknown.outcome == "unknown"
    assert "no wish" in unknown.reason
    assert isinstance(unknown.error(), MissingEvidence)


# -- AUTOSCALE-03 --------------------------------------------------------------------------
INFEASIBLE = Infeasible(
    feasible=ran("plain-1", "plain", T0),
    watched={
        "pending": True,
        "lines": ["{'CPU': 8.0}: 1+ pending tasks/actors"],
        "watched_s": 10.0,
        "status": "…",
    },
    launched=["plain"],
    log="… The autoscaler could not find a node type to satisfy the request: [{'CPU': 8.0}]\n",
)


def test_autoscale03_an_infeasible_request_launches_nothing_and_is_reported() -> None:
    held = infeasible_reported(INFEASIBLE, 8)
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-03"
    log = next(m for m in held.measured if m.name == "AUTOSCALE-03 autoscaler log")
    assert log.value == [INFEASIBLE.log.strip()]


def test_autoscale03_a_node_for_it_or_no_report_of_it_fails() -> None:
    launched = infeasible_reported(replace(INFEASIBLE, launched=["plain", "plain"]), 8)
    assert launched.outcome == "failed"
    assert "exactly one node" in launched.reason
    ran_it = replace(INFEASIBLE, watched={**INFEASIBLE.watched, "pending": False})
    assert "must still be pending" in infeasible_reported(ran_it, 8).reason
    unlisted = replace(INFEASIBLE, watched={**INFEASIBLE.watched, "lines": []})
    assert "ray status must list {'CPU': 8.0}" in infeasible_reported(unlisted, 8).reason
    assert (
        "names no infeasible request" in infeasible_reported(replace(INFEASIBLE, log=""), 8).reason
    )
    stuck = replace(INFEASIBLE, feasible={"value": None, "error": {"type": "GetTimeoutError"}})
    assert "the feasible task must run" in infeasible_reported(stuck, 8).reason


# -- AUTOSCALE-04 --------------------------------------------------------------------------
V1_DEAD = {"state": "DEAD", "state_message": "Expected termination: Terminated by autoscaler."}


def test_autoscale04_an_idle_node_is_removed_after_the_timeout() -> None:
    held = idle_node_removed(T0, T0 + 7.05, IDLE_WINDOW, V1_DEAD, "Terminated by autoscaler")
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-04"
    window = held.measured[0]
    assert (window.name, window.value, window.band, window.start) == (
        "AUTOSCALE-04 task end to removal (s)",
        7.05,
        IDLE_WINDOW,
        T0,
    )
    v2 = {
        "state": "DEAD",
        "state_message": "Terminated due to idle (no Ray activity): Termination of node "
        "that's idle for 6.307 seconds.",
    }
    assert idle_node_removed(T0, T0 + 8.12, IDLE_WINDOW, v2, "Terminated due to idle").held


def test_autoscale04_an_early_or_late_removal_or_another_death_fails() -> None:
    early = idle_node_removed(T0, T0 + 5.9, IDLE_WINDOW, V1_DEAD, "Terminated by autoscaler")
    assert early.outcome == "failed"
    assert "removed 5.9 s after its last task; expected within [6, 21] s" in early.reason
    # The death message is not read once the window has failed.
    assert [m.name for m in early.measured] == ["AUTOSCALE-04 task end to removal (s)"]
    late = idle_node_removed(T0, T0 + 21.2, IDLE_WINDOW, V1_DEAD, "Terminated by autoscaler")
    assert "removed 21.2 s" in late.reason
    # Judged unrounded: 21.004 s is out, though it is measured as 21.0.
    assert not idle_node_removed(
        T0, T0 + 21.004, IDLE_WINDOW, V1_DEAD, "Terminated by autoscaler"
    ).held
    crashed = {"state": "DEAD", "state_message": "Unexpected termination: health check failed"}
    other = idle_node_removed(T0, T0 + 7.05, IDLE_WINDOW, crashed, "Terminated by autoscaler")
    assert other.outcome == "failed"
    assert "terminated as idle" in other.reason
    assert other.measured[-1].name == "AUTOSCALE-04 death message"


# -- AUTOSCALE-05 --------------------------------------------------------------------------
# Run A: the replacement plain-2 launched 11.48 s after the kill.
FIRST = launch(T0 - 30, "plain-1", "plain", "n1")
REPLACED = [FIRST, launch(T0 + 11.48, "plain-2", "plain", "n2")]


def test_autoscale05_a_killed_min_workers_node_is_replaced() -> None:
    held = min_workers_replaced(REPLACED, T0, REPLACE_S, "plain")
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-05"
    assert "plain-2" in held.reason
    assert held.measured[0].name == "AUTOSCALE-05 kill to replacement launch (s)"
    assert held.measured[0].value == 11.48


def test_autoscale05_a_late_a_reused_or_a_second_replacement_fails() -> None:
    late = [FIRST, launch(T0 + 31.0, "plain-2", "plain", "n2")]
    failed = min_workers_replaced(late, T0, REPLACE_S, "plain")
    assert failed.outcome == "failed"
    assert "replaced 31.0 s after the kill" in failed.reason
    same = [FIRST, launch(T0 + 11.48, "plain-2", "plain", "n1")]
    assert "a new Ray node" in min_workers_replaced(same, T0, REPLACE_S, "plain").reason
    other = [FIRST, launch(T0 + 11.48, "big-1", "big", "n2")]
    assert "must be a plain node" in min_workers_replaced(other, T0, REPLACE_S, "plain").reason
    two = [*REPLACED, launch(T0 + 12.5, "plain-3", "plain", "n3")]
    assert "one replacement, no more" in min_workers_replaced(two, T0, REPLACE_S, "plain").reason
    assert "no replacement" in min_workers_replaced([FIRST], T0, REPLACE_S, "plain").reason


# -- AUTOSCALE-06 --------------------------------------------------------------------------
def test_autoscale06_requested_nodes_are_held_then_removed_once_released() -> None:
    held = request_holds_until_released(T0, T0 + 16.0, T0 + 16.0 + 7.58, IDLE_WINDOW[1])
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-06"
    assert [(m.name, m.value) for m in held.measured] == [
        ("AUTOSCALE-06 release to last removal (s)", 7.58),
        ("AUTOSCALE-06 held (s)", 16.0),
    ]
    assert held.measured[0].band == (0.0, IDLE_WINDOW[1])


def test_autoscale06_a_removal_long_after_the_release_fails() -> None:
    # CI's run of 5 December 2026 (before the hold waited for both nodes): 33.1 s.
    failed = request_holds_until_released(T0, T0 + 16.0, T0 + 16.0 + 33.1, IDLE_WINDOW[1])
    assert failed.outcome == "failed"
    assert failed.claim == "AUTOSCALE-06"
    assert "33.1 s after the release" in failed.reason
    assert isinstance(failed.error(), CheckFailed)


# -- AUTOSCALE-07 --------------------------------------------------------------------------
GROUP = PendingGroup(
    created={"state": "PENDING"},
    listed={
        "state_before": "PENDING",
        "state_after": "PENDING",
        "s": 2.62,
        "lines": [PENDING_GROUP_LINE],
        "status": "…",
    },
    ready={
        "ready": True,
        "s": 15.76,
        "state": "CREATED",
        "bundles_to_node_id": {"0": "n2", "1": "n1"},
    },
    launched={"n1": "plain-1", "n2": "plain-2"},
)


def test_autoscale07_a_pending_group_is_listed_then_placed() -> None:
    held = pending_group_placed(GROUP)
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-07"
    bundles = next(m for m in held.measured if m.name == "AUTOSCALE-07 bundles on")
    assert bundles.value == {"0": "plain-2", "1": "plain-1"}


def test_autoscale07_a_listing_after_placement_or_a_misplaced_bundle_fails() -> None:
    after = replace(GROUP, listed={**GROUP.listed, "state_before": "CREATED"})
    failed = pending_group_placed(after)
    assert failed.outcome == "failed"
    assert "before it left PENDING" in failed.reason
    unlisted = replace(
        GROUP, listed={**GROUP.listed, "lines": ["{'CPU': 1.0}: 2+ pending tasks/actors"]}
    )
    assert "under Pending Demands" in pending_group_placed(unlisted).reason
    unplaced = replace(GROUP, ready={**GROUP.ready, "ready": False})
    assert "was not placed" in pending_group_placed(unplaced).reason
    one = replace(GROUP, launched={"n1": "plain-1"})
    assert "two nodes" in pending_group_placed(one).reason
    elsewhere = replace(GROUP, ready={**GROUP.ready, "bundles_to_node_id": {"0": "n1", "1": "n9"}})
    assert "bundles off the launched nodes" in pending_group_placed(elsewhere).reason
    created = replace(GROUP, created={"state": "CREATED"})
    assert "PENDING when created" in pending_group_placed(created).reason


# -- AUTOSCALE-08 --------------------------------------------------------------------------
LISTED = {
    "pending": ["10.0.0.5: broken, uninitialized"],
    "failures": ["(no failures)"],
    "status": "…",
}
BROKEN = BrokenType(
    plain=ran("plain-1", "plain", T0),
    listed=LISTED,
    watched={**LISTED, "stuck": True},
    ip="10.0.0.5",
)


def test_autoscale08_a_broken_type_is_listed_pending_and_blocks_no_other() -> None:
    held = broken_type_reported(BROKEN, 30.0)
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-08"
    assert [m.name for m in held.measured] == [
        "AUTOSCALE-08 pending",
        "AUTOSCALE-08 recent failures",
        "AUTOSCALE-08 after 30 s",
    ]


def test_autoscale08_an_unlisted_broken_node_or_a_blocked_type_fails() -> None:
    dropped = replace(BROKEN, watched={"pending": [], "stuck": True, "status": "…"})
    failed = broken_type_reported(dropped, 30.0)
    assert failed.outcome == "failed"
    assert "30 s later" in failed.reason
    unlisted = replace(BROKEN, listed={**LISTED, "pending": ["10.0.0.4: plain, uninitialized"]})
    assert "under Pending" in broken_type_reported(unlisted, 30.0).reason
    blocked = replace(BROKEN, plain={"value": None, "error": {"type": "GetTimeoutError"}})
    assert "the plain task must run" in broken_type_reported(blocked, 30.0).reason
    misplaced = replace(BROKEN, plain=ran("broken-1", "broken", T0))
    assert "on a plain node" in broken_type_reported(misplaced, 30.0).reason
    ran_it = replace(BROKEN, watched={**BROKEN.watched, "stuck": False})
    assert "must still wait" in broken_type_reported(ran_it, 30.0).reason


def test_autoscale08_a_plain_task_without_an_outcome_cannot_be_judged() -> None:
    unknown = broken_type_reported(replace(BROKEN, plain={}), 30.0)
    assert unknown.outcome == "unknown"
    assert "no outcome" in unknown.reason


# -- AUTOSCALE-09 --------------------------------------------------------------------------
# Run B: the last report 0.9 s before the kill; the tasks 10 s apart on plain-1.
REPORT = "======== Autoscaler status: 2026-12-04 22:53:10.100000 ========\nNode status\n…"
#: That header's stamp, the head's local time (UTC), as a UNIX time.
REPORTED = 1_796_424_790.1
KILLED = REPORTED + 0.9
AUTOSCALER_KILL = AutoscalerKill(
    killed_at=KILLED,
    gone_at=KILLED + 0.4,
    node="plain-1",
    launched=[launch(KILLED - 20, "plain-1", "plain", "n1")],
    outcomes=[ran("plain-1", "plain", KILLED + 2 + 10 * i) for i in range(3)],
    last_ran_at=KILLED + 32.5,
    monitors=[],
    status=REPORT,
)


def test_autoscale09_the_report_time_is_the_headers_utc_stamp() -> None:
    assert report_time(REPORT) == REPORTED
    assert report_time("Node status\n(no report)") is None


def test_autoscale09_a_killed_autoscaler_stays_dead_and_its_node_works_on() -> None:
    held = killed_autoscaler_stays_dead(AUTOSCALER_KILL, 18.0)
    assert held.held, held.reason
    assert held.claim == "AUTOSCALE-09"
    measured = {m.name: m.value for m in held.measured}
    assert measured["AUTOSCALE-09 last report, s before the kill"] == 0.9
    assert measured["AUTOSCALE-09 launches after the kill"] == 0
    assert measured["AUTOSCALE-09 demand pending (s)"] == 20.0
    assert measured["AUTOSCALE-09 watched after the kill (s)"] == 32.5


def test_autoscale09_a_launch_a_restarted_monitor_or_a_later_report_fails() -> None:
    later = replace(AUTOSCALER_KILL, gone_at=REPORTED - 0.1)
    failed = killed_autoscaler_stays_dead(later, 18.0)
    assert failed.outcome == "failed"
    assert "a report from after the kill" in failed.reason
    back = replace(AUTOSCALER_KILL, monitors=[4242])
    assert "runs again on the head: PIDs [4242]" in killed_autoscaler_stays_dead(back, 18.0).reason
    launched = [*AUTOSCALER_KILL.launched, launch(KILLED + 3, "plain-2", "plain", "n2")]
    assert (
        "launched after the kill"
        in killed_autoscaler_stays_dead(replace(AUTOSCALER_KILL, launched=launched), 18.0).reason
    )
    spread = [ran(f"plain-{i}", "plain", KILLED + 2) for i in range(3)]
    assert (
        "every task on the node already there"
        in killed_autoscaler_stays_dead(replace(AUTOSCALER_KILL, outcomes=spread), 18.0).reason
    )
    together = [ran("plain-1", "plain", KILLED + 2 + i) for i in range(3)]
    assert (
        "did not queue"
        in killed_autoscaler_stays_dead(replace(AUTOSCALER_KILL, outcomes=together), 18.0).reason
    )
    no_report = replace(AUTOSCALER_KILL, status="Node status\n…")
    silent = killed_autoscaler_stays_dead(no_report, 18.0)
    assert silent.outcome == "failed"
    assert "shows no autoscaler report" in silent.reason
