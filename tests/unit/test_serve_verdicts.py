"""SERVE-01 … SERVE-07's verdicts on records shaped as the runs record them (no Docker).

Each verdict is judged on a record of a run where the claim held, on one where it did not
(the failure named), and, where the record can be too thin to decide, on that (unknown). The
controller's lines are written as Serve 2.60.0 logs them and matched by the experiments' own
rules, so the rules are checked with the verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

import pytest

from chaos.testing import CheckFailed, MissingEvidence
from experiments.verdicts.serve_gcs import (
    Outage,
    UpdatedDuringOutage,
    UpdateNotCompleted,
    served_through_outage,
)
from experiments.verdicts.serve_health import HealthRounds, failing_checks, start_failures
from experiments.verdicts.serve_nodes import NodeDeath, replicas_moved
from experiments.verdicts.serve_processes import (
    PROXY_RULES,
    REPLICA_RULES,
    ProxyChecks,
    ProxyKill,
    ReplicaBounds,
    ReplicaKill,
    controller_restarted,
    proxy_replaced,
    replica_replaced,
)

T0 = 1_796_392_900.0
UID, NEW_UID = "x9k2abcd", "q7m1efgh"
NID = "a863c9fa69dcb9aace3e231e2a9ff77820099c394a54119d14a729d2"


def load(
    targets: tuple[str, ...] = ("worker-1", "worker-2"),
    until: float = T0 + 60,
    failed: Mapping[str, list[tuple[float, float]]] | None = None,
    silent: Mapping[str, tuple[float, float]] | None = None,
    answered_by: Mapping[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    """The client's result: an answer every 0.1 s per proxy (none in ``silent``), the
    ``failed`` requests as (sent, done)."""
    out: dict[str, Any] = {"started": T0, "threads_per_target": 2, "targets": {}}
    for target in targets:
        quiet = (silent or {}).get(target, (0.0, 0.0))
        ok = [T0 + i / 10 for i in range(int((until - T0) * 10))]
        out["targets"][target] = {
            "ok_at": [t for t in ok if not quiet[0] <= t <= quiet[1]],
            "failures": [
                {"sent": s, "done": d, "code": None, "error": "RemoteDisconnected"}
                for s, d in (failed or {}).get(target, [])
            ],
            "answered_by": (answered_by or {}).get(target, {}),
        }
    return out


def rows(rules: Mapping[str, str], logged: list[tuple[float, str]]) -> list[dict[str, Any]]:
    """The lines ``workloads.serve:logged`` would return for ``rules``."""
    found = []
    for t, line in logged:
        for name, rule in rules.items():
            hit = re.search(rule, line)
            if hit:
                found.append({"rule": name, "t": t, "groups": list(hit.groups()), "line": line})
                break
    return found


# -- SERVE-05 -----------------------------------------------------------------------------------


def test_serve05_holds_without_failures_and_fails_on_one_or_another_actor() -> None:
    kwargs: dict[str, Any] = {
        "killed_at": T0 + 10, "back_at": T0 + 25, "window": (T0, T0 + 30), "next_strike": T0 + 31,
    }  # fmt: skip
    held = controller_restarted(load(), ["worker-1", "worker-2"], same_actor=True, **kwargs)
    assert held.held, held
    assert "back 15.0 s after the kill" in held.reason
    # A request sent at the kill that failed: the claim did not hold.
    failed = load(failed={"worker-2": [(T0 + 11, T0 + 11.2)]})
    verdict = controller_restarted(failed, ["worker-1", "worker-2"], same_actor=True, **kwargs)
    assert verdict.outcome == "failed" and "worker-2" in verdict.reason
    # One in flight at the next strike (ended after it) is that strike's to judge.
    theirs = load(failed={"worker-1": [(T0 + 30.9, T0 + 31.4)]})
    assert controller_restarted(theirs, ["worker-1"], same_actor=True, **kwargs).held
    other = controller_restarted(load(), ["worker-1"], same_actor=False, **kwargs)
    assert other.outcome == "failed" and "another actor" in other.reason


# -- SERVE-01 -----------------------------------------------------------------------------------


def controller_lines(
    crash_at: float, extra: tuple[tuple[float, str], ...] = ()
) -> list[tuple[float, str]]:
    replica = f"Replica(id='{UID}', deployment='Echo', app='echo')"
    new = f"Replica(id='{NEW_UID}', deployment='Echo', app='echo')"
    return sorted(
        [
            (
                crash_at,
                f"INFO controller 71 -- Actor for {replica} crashed, marking it unhealthy immediately.",
            ),
            (crash_at + 0.02, f"INFO controller 71 -- Starting {new}."),
            (
                crash_at + 3.1,
                f"INFO controller 71 -- {new} started successfully on node 'n' after 3.1s (PID: 412).",
            ),
            *extra,
        ]
    )


def serve01(logged: list[tuple[float, str]], record: dict[str, Any], **kill: Any) -> Any:
    rules = {k: v.format(rid=re.escape(UID)) for k, v in REPLICA_RULES.items()}
    facts: dict[str, Any] = {
        "killed_at": T0 + 30, "dead_at": T0 + 30.2, "uid": UID, "node": "worker-1",
        "new_alive": T0 + 36, "replaced": {"actor-new": f"SERVE_REPLICA::echo#Echo#{NEW_UID}"},
        "window": (T0 + 29, T0 + 45),
    }  # fmt: skip
    facts.update(kill)
    bounds = ReplicaBounds(detect_s=3.3, replica_s=34.3)
    return replica_replaced(
        rows(rules, logged), record, ReplicaKill(**facts), bounds, ["worker-1", "worker-2"], 10.0
    )


SERVED = {"worker-1": {"actor-new": 40}, "worker-2": {"actor-2": 300}}


def test_serve01_holds_on_the_first_checks_crash_line_and_one_lost_request_per_thread() -> None:
    record = load(failed={"worker-1": [(T0 + 29.9, T0 + 30.1)]}, answered_by=SERVED)
    held = serve01(controller_lines(T0 + 31.2), record)
    assert held.held, held.reason
    measured = {m.name: m.value for m in held.measured}
    assert measured["SERVE-01 kill → the controller's crash line (s)"] == 1.2
    assert measured["SERVE-01 failed requests in flight at the kill"] == {
        "worker-1": 1,
        "worker-2": 0,
    }


def test_serve01_fails_on_a_late_crash_line_a_failed_check_first_or_a_request_after_death() -> None:
    record = load(answered_by=SERVED)
    late = serve01(controller_lines(T0 + 34.0), record)
    assert late.outcome == "failed" and "saw the crash 4.0 s after the kill" in late.reason
    # A timed-out check before the crash line: not the first check that saw it.
    missed = (
        T0 + 31.0,
        f"WARNING controller 71 -- Didn't receive health check response for replica Replica(id='{UID}', deployment='Echo', app='echo') after 3s",
    )
    checked = serve01(controller_lines(T0 + 32.0, (missed,)), record)
    assert checked.outcome == "failed" and "failed before the crash was seen" in checked.reason
    after = load(failed={"worker-2": [(T0 + 33, T0 + 33.1)]}, answered_by=SERVED)
    lost = serve01(controller_lines(T0 + 31.2), after)
    assert lost.outcome == "failed" and "sent after the replica's death" in lost.reason
    never = serve01(controller_lines(T0 + 31.2), record, new_alive=None)
    assert never.outcome == "failed" and "never saw the new replica ALIVE" in never.reason
    with pytest.raises(CheckFailed, match="SERVE-01: the observer never saw"):
        raise never.error()


# -- SERVE-04 -----------------------------------------------------------------------------------


def proxy_lines(first: float, gaps: list[float], in_a_row: int = 3) -> list[tuple[float, str]]:
    times = [first]
    for gap in gaps:
        times.append(times[-1] + gap)
    logged = [
        (
            t,
            f"WARNING controller 71 -- Unexpected error invoking health check for proxy on {NID}: ActorDiedError",
        )
        for t in times
    ]
    verdict_at = times[-1] + 0.01
    logged.append(
        (
            verdict_at,
            f"WARNING controller 71 -- Proxy SERVE_PROXY_ACTOR-{NID} failed the health check {in_a_row} times in a row, marking it unhealthy.",
        )
    )
    logged.append(
        (
            verdict_at + 0.05,
            f"INFO controller 71 -- Starting proxy 'SERVE_PROXY_ACTOR-{NID}' on node '{NID}' listening on '0.0.0.0:8000'",
        )
    )
    return logged


def serve04(logged: list[tuple[float, str]], record: dict[str, Any], **kill: Any) -> Any:
    rules = {k: v.format(nid=re.escape(NID)) for k, v in PROXY_RULES.items()}
    facts: dict[str, Any] = {
        "killed_at": T0 + 10, "dead_at": T0 + 10.1, "node_id": NID, "node": "worker-1",
        "new_alive": T0 + 20, "end": T0 + 40,
    }  # fmt: skip
    facts.update(kill)
    checks = ProxyChecks(threshold=3, period_s=2.0, gap_s=3.1, answer_s=3 * 3.1 + 1 + 30)
    return proxy_replaced(rows(rules, logged), record, ProxyKill(**facts), checks, ["worker-2"])


def test_serve04_holds_on_three_checks_one_period_apart_then_the_verdict_then_the_proxy() -> None:
    record = load(silent={"worker-1": (T0 + 10, T0 + 22)})
    held = serve04(proxy_lines(T0 + 11.0, [2.2, 2.3]), record)
    assert held.held, held.reason
    measured = {m.name: m.value for m in held.measured}
    assert measured["SERVE-04 kill → first failed check, then between failed checks (s)"] == [
        1.0,
        2.2,
        2.3,
    ]


def test_serve04_fails_on_early_checks_another_threshold_or_a_refused_request_elsewhere() -> None:
    record = load(silent={"worker-1": (T0 + 10, T0 + 22)})
    fast = serve04(proxy_lines(T0 + 11.0, [0.5, 2.2]), record)
    assert fast.outcome == "failed" and "PROXY_HEALTH_CHECK_PERIOD_S" in fast.reason
    four = serve04(proxy_lines(T0 + 11.0, [2.2, 2.2, 2.2], in_a_row=4), record)
    assert four.outcome == "failed" and "after 4 failed checks" in four.reason
    refused = load(
        silent={"worker-1": (T0 + 10, T0 + 22)}, failed={"worker-2": [(T0 + 12, T0 + 12.1)]}
    )
    other = serve04(proxy_lines(T0 + 11.0, [2.2, 2.3]), refused)
    assert other.outcome == "failed" and "worker-2" in other.reason


# -- SERVE-02, SERVE-07 -------------------------------------------------------------------------


def health_rounds(in_a_row: int = 3, later: int = 0) -> HealthRounds:
    once = [(T0 + i, i != 2) for i in range(6)]
    alternate = [(T0 + 10 + i, i % 2 == 0) for i in range(9)]
    failing_from = T0 + 30
    checks = [(T0 + 20 + i, True) for i in range(10)]
    checks += [(failing_from + i, False) for i in range(in_a_row)]
    verdict_at = checks[-1][0] + 0.2
    checks += [(verdict_at + 0.5 + i, False) for i in range(later)]
    rounds = {
        "once": {"same_actor": True, "checks": once, "checks_run": 6},
        "alternate": {"same_actor": True, "checks": alternate, "checks_run": 9},
        "always": {"replaced": True, "after": {"t": failing_from + 9.0}},
    }
    verdicts = [
        {
            "t": verdict_at,
            "in_a_row": 3,
            "line": "… failed the health check 3 times in a row, marking it unhealthy.",
        }
    ]
    return HealthRounds(rounds, checks, verdicts, failing_from + 7.5)


def test_serve02_holds_on_exactly_the_threshold_before_the_controllers_verdict() -> None:
    held = failing_checks(health_rounds(later=1), 3, 33.3)
    assert held.held, held.reason
    assert "replaced 7.5 s after the first" in held.reason


def test_serve02_fails_on_a_fourth_failure_before_the_verdict_or_two_after() -> None:
    four = failing_checks(health_rounds(in_a_row=4), 3, 33.3)
    assert four.outcome == "failed" and "ran 4 failed checks in a row" in four.reason
    after = failing_checks(health_rounds(later=2), 3, 33.3)
    assert after.outcome == "failed" and "checks after the verdict" in after.reason
    seen = health_rounds()
    replaced_once = HealthRounds(
        {**seen.rounds, "once": {**seen.rounds["once"], "same_actor": False}},
        seen.checks,
        seen.verdicts,
        seen.new_alive,
    )
    assert "once: the replica was replaced" in failing_checks(replaced_once, 3, 33.3).reason


STARTS: dict[str, Any] = {
    "ctor": {
        "status": {"status": "DEPLOY_FAILED", "deployments": {"Broken": {"status": "DEPLOY_FAILED", "message": "ValueError: this constructor refuses"}}},
        "changes": [], "replica_actors": [{}] * 3, "replica_actors_later": [{"state": "DEAD"}] * 3,
        "to_terminal_s": 12.0, "serve_run": "raised",
    },
    "import": {
        "put": {"code": 200},
        "status": {"status": "DEPLOY_FAILED", "message": "Traceback (most recent call last): ModuleNotFoundError: No module named 'raychaos_no_such_module'"},
        "to_terminal_s": 3.0,
    },
    "resources": {
        "status": {"deployments": {"Starved": {"status": "UPDATING", "message": "Deployment 'Starved' has 1 replicas that have taken more than 5s to be scheduled … {'raychaos_absent': 1}"}}},
        "held": {"deployments": {"Starved": {"status": "UPDATING"}}},
        "changes": [{"brief": {"status": "DEPLOYING"}}], "replica_actors": [{}], "warned_after_s": 5.4,
    },
}  # fmt: skip
CONSTANTS = {"MAX_PER_REPLICA_RETRY_COUNT": 3, "DEFAULT_CONSTRUCTOR_RETRY_COUNT": 20}


def test_serve07_holds_on_the_documented_ends_and_fails_on_a_retry_too_many() -> None:
    assert start_failures(STARTS, CONSTANTS).held
    more = deepcopy(STARTS)
    more["ctor"]["replica_actors"] = [{}] * 4
    more["ctor"]["replica_actors_later"] = [{"state": "DEAD"}] * 4
    verdict = start_failures(more, CONSTANTS)
    assert verdict.outcome == "failed" and "4 replicas started" in verdict.reason
    failed = deepcopy(STARTS)
    failed["resources"]["changes"].append({"brief": {"status": "DEPLOY_FAILED"}})
    assert start_failures(failed, CONSTANTS).outcome == "failed"


# -- SERVE-03 -----------------------------------------------------------------------------------


def test_serve03_caps_failures_before_dead_and_allows_none_after() -> None:
    death = NodeDeath(killed_at=T0 + 10, dead_at=T0 + 14, new_alive=T0 + 18, end=T0 + 40)
    before = load(
        ("worker-2", "head"), failed={"head": [(T0 + 10.5, T0 + 10.6), (T0 + 11, T0 + 11.1)]}
    )
    assert replicas_moved(before, death, (3.0, 9.0), 40.0, ["worker-2", "head"], 10.0).held
    over = load(
        ("worker-2", "head"), failed={"head": [(T0 + 10 + i / 10, T0 + 11) for i in range(3)]}
    )
    capped = replicas_moved(over, death, (3.0, 9.0), 40.0, ["worker-2", "head"], 10.0)
    assert capped.outcome == "failed" and "(2 per proxy" in capped.reason
    after = load(("worker-2", "head"), failed={"worker-2": [(T0 + 15, T0 + 15.1)]})
    late = replicas_moved(after, death, (3.0, 9.0), 40.0, ["worker-2", "head"], 10.0)
    assert late.outcome == "failed" and "after worker-1 was DEAD" in late.reason


# -- SERVE-06 -----------------------------------------------------------------------------------

OUTAGE = Outage(
    gcs_at=T0 + 10,
    restart_at=T0 + 35,
    back_at=T0 + 45,
    recovered_at=T0 + 70,
    recover_s=90.0,
    update_s=8.0,
)
UPDATE: dict[str, Any] = {
    "during": {"waiting": True},
    "final": {"returned_at": T0 + 72},
    "versions_during": {"versions": {"v1": 40}},
    "versions_after": {"versions": {"v2": 30}},
    "status_after": {"status": "RUNNING"},
}


def test_serve06_holds_when_the_update_waits_and_lands_after_the_head() -> None:
    held = served_through_outage(
        load(until=T0 + 80), UPDATE, OUTAGE, ["worker-1", "worker-2"], True
    )
    assert held.held, held.reason
    assert "waited through the outage" in held.reason


def test_serve06_an_update_during_the_outage_is_a_finding_and_a_silent_app_unknown() -> None:
    early = deepcopy(UPDATE)
    early["versions_during"]["versions"]["v2"] = 3
    verdict = served_through_outage(load(until=T0 + 80), early, OUTAGE, ["worker-1"], True)
    assert verdict.outcome == "failed" and isinstance(verdict.error(), UpdatedDuringOutage)
    stuck = deepcopy(UPDATE)
    stuck["final"] = {"waiting": True}
    assert isinstance(
        served_through_outage(load(until=T0 + 80), stuck, OUTAGE, ["worker-1"], True).error(),
        UpdateNotCompleted,
    )
    silent = deepcopy(UPDATE)
    silent["versions_during"]["versions"] = {}
    unknown = served_through_outage(load(until=T0 + 80), silent, OUTAGE, ["worker-1"], True)
    assert unknown.outcome == "unknown" and isinstance(unknown.error(), MissingEvidence)
    refused = load(until=T0 + 80, failed={"worker-1": [(T0 + 20, T0 + 20.5)]})
    assert served_through_outage(refused, UPDATE, OUTAGE, ["worker-1"], True).outcome == "failed"
