"""SERVE-02, SERVE-07 as pure verdicts: failing health checks, deployments that cannot
start."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Judging, verdict

from .serve_traffic import (
    STAMP_S,
    trailing_failures,
)

# -- SERVE-02, SERVE-07: failing health checks, deployments that cannot start --------------------


@dataclass(frozen=True)
class HealthRounds:
    """What SERVE-02's run recorded: the three rounds' results (``workloads.serve:
    health_rounds``), the always-failing replica's own check log ``(t, ok)``, the controller's
    unhealthy verdicts for it, and when the observer saw its replacement ALIVE."""

    rounds: Mapping[str, Any]
    checks: Sequence[tuple[float, bool]]
    verdicts: Sequence[Mapping[str, Any]]
    new_alive: float | None


@verdict("SERVE-02")
def failing_checks(j: Judging, seen: HealthRounds, threshold: int, bound_s: float) -> str:
    """A replica's ``check_health`` failing once, or every other time, replaces nothing;
    failing every time replaces it after exactly the threshold in a row. Judged against the
    controller's own verdict ("failed the health check N times in a row, marking it
    unhealthy"): N is the threshold, the replica ran exactly that many failed checks in a
    row before it, and at most one after it (the pass that gives the verdict may start one
    more: its period has run out); the new replica ALIVE within the bound of the first."""
    for name, failing in (("once", 1), ("alternate", 4)):
        round_ = seen.rounds[name]
        j.require(bool(round_["same_actor"]), f"{name}: the replica was replaced: {round_}")
        checks = [(float(t), bool(ok)) for t, ok in round_["checks"]]
        fails = [t for t, ok in checks if not ok]
        j.measure(f"SERVE-02 {name}: checks run, failed", [round_["checks_run"], len(fails)])
        j.require(len(fails) == failing, f"{name}: {failing} failing checks expected: {checks}")
        longest = max(len(trailing_failures(checks[: i + 1])) for i in range(len(checks)))
        j.require(longest == 1, f"{name}: never two failures in a row by design: {checks}")
    j.require(
        bool(seen.rounds["always"]["replaced"]), "a replica failing every check must be replaced"
    )
    oks = [t for t, ok in seen.checks if ok]
    intervals = [b - a for a, b in itertools.pairwise(oks)]
    j.measure(
        "SERVE-02 median interval between checks (s)",
        round(statistics.median(intervals), 2) if intervals else None,
    )
    j.require(len(seen.verdicts) == 1, f"one 'marking it unhealthy' line: {seen.verdicts}")
    given = seen.verdicts[0]
    j.measure("SERVE-02 failed checks in a row at the verdict", given["in_a_row"])
    j.require(
        given["in_a_row"] == threshold,
        f"marked unhealthy after {given['in_a_row']} failed checks in a row; "
        f"REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD is {threshold}: {given['line']}",
    )
    # The log stamps truncate to the millisecond; a check's RPC takes longer than that.
    judged = [c for c in seen.checks if c[0] < given["t"] + STAMP_S]
    later = [c for c in seen.checks if c[0] >= given["t"] + STAMP_S]
    run = trailing_failures(judged)
    j.measure("SERVE-02 failed checks in a row before the verdict", len(run))
    j.measure("SERVE-02 checks run after the verdict", len(later))
    j.require(
        len(run) == threshold,
        f"the replica ran {len(run)} failed checks in a row before the verdict; "
        f"REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD is {threshold}: {list(seen.checks)[-8:]}, {given}",
    )
    j.require(len(later) <= 1, f"checks after the verdict: {later} ({given})")
    new_alive = j.found(seen.new_alive, "the observer never saw the new patient replica ALIVE")
    window = j.measure(
        "SERVE-02 first failed check → new replica ALIVE (s)",
        round(new_alive - run[0], 2),
        band=(0.0, bound_s),
        start=run[0],
    )
    j.require(
        window <= bound_s, f"replaced {window} s after the first failed check (bound {bound_s})"
    )
    answered = seen.rounds["always"]["after"]["t"]
    j.measure(
        "SERVE-02 first failed check → the new replica answers (s)", round(answered - run[0], 2)
    )
    return (
        f"one failure and four alternating ones replaced nothing; {threshold} in a row did, "
        f"by the controller's verdict, replaced {window} s after the first"
    )


@verdict("SERVE-07")
def start_failures(j: Judging, seen: Mapping[str, Any], constants: Mapping[str, Any]) -> str:
    """A raising constructor ends DEPLOY_FAILED with its exception after min(replicas ×
    MAX_PER_REPLICA_RETRY_COUNT, the constructor retry count) starts and no more; a failing
    import path ends DEPLOY_FAILED with the traceback; a replica asking for a resource no
    node has stays UPDATING with the slow-start message, one replica, never retried."""
    ctor = seen["ctor"]
    dep = ctor["status"]["deployments"]["Broken"]
    j.measure("SERVE-07 constructor: status changes", ctor["changes"])
    j.require(ctor["status"]["status"] == "DEPLOY_FAILED", f"constructor: {ctor['status']}")
    j.require(dep["status"] == "DEPLOY_FAILED", f"constructor: {dep}")
    j.require(
        "ValueError" in dep["message"] and "this constructor refuses" in dep["message"],
        f"the constructor's exception in the message: {dep}",
    )
    expected_starts = min(
        1 * int(constants["MAX_PER_REPLICA_RETRY_COUNT"]),
        int(constants["DEFAULT_CONSTRUCTOR_RETRY_COUNT"] or 20),
    )
    starts = j.measure("SERVE-07 constructor: replica actors started", len(ctor["replica_actors"]))
    j.measure("SERVE-07 constructor: deploy → DEPLOY_FAILED (s)", ctor["to_terminal_s"])
    j.require(
        starts == expected_starts,
        f"{starts} replicas started; min(1 × MAX_PER_REPLICA_RETRY_COUNT, "
        f"max_constructor_retry_count) = {expected_starts}: {ctor['replica_actors']}",
    )
    j.require(
        len(ctor["replica_actors_later"]) == starts, "a replica was started after DEPLOY_FAILED"
    )
    j.require(all(a["state"] == "DEAD" for a in ctor["replica_actors_later"]), f"{ctor}")
    j.measure("SERVE-07 constructor: serve.run", ctor["serve_run"])
    imp = seen["import"]
    j.measure("SERVE-07 import: PUT", imp["put"])
    j.require(imp["put"]["code"] == 200, f"import: {imp['put']}")
    j.require(imp["status"]["status"] == "DEPLOY_FAILED", f"import: {imp['status']}")
    message = imp["status"]["message"]
    j.require(
        "ModuleNotFoundError" in message and "raychaos_no_such_module" in message
        and "Traceback" in message,
        f"import: the traceback in the message: {message}",
    )  # fmt: skip
    j.measure("SERVE-07 import: PUT → DEPLOY_FAILED (s)", imp["to_terminal_s"])
    res = seen["resources"]
    dep = res["status"]["deployments"]["Starved"]
    j.measure("SERVE-07 resources: message", dep["message"])
    j.measure("SERVE-07 resources: deploy → slow-start message (s)", res["warned_after_s"])
    j.require(dep["status"] == "UPDATING", f"resources: {dep}")
    j.require(
        "to be scheduled" in dep["message"] and "raychaos_absent" in dep["message"],
        f"resources: the slow-start message: {dep}",
    )
    held = res["held"]["deployments"]["Starved"]
    j.require(held["status"] == "UPDATING", f"resources: still waiting, not failed: {held}")
    statuses = {c["brief"]["status"] for c in res["changes"]}
    j.require("DEPLOY_FAILED" not in statuses, f"resources: {res['changes']}")
    j.require(
        len(res["replica_actors"]) == 1, f"one replica, never retried: {res['replica_actors']}"
    )
    return (
        f"a raising constructor DEPLOY_FAILED after {starts} starts, a failing import "
        "DEPLOY_FAILED with its traceback, a starved replica UPDATING with the slow-start message"
    )
