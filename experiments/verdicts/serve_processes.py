"""SERVE-05, SERVE-01, SERVE-04 as pure verdicts: the controller, a replica and a proxy
killed under load, judged from the controller's own log and the client's record."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Judging, rows_of, verdict

from .serve_traffic import (
    CONTROLLER_LAG_S,
    REPLACE_S,
    STAMP_S,
    Load,
    failures,
    first_ok,
    longest_gap,
    no_failures_sent,
)

# -- SERVE-05, SERVE-01, SERVE-04: the controller, a replica, a proxy killed ---------------------


@verdict("SERVE-05")
def controller_restarted(
    j: Judging,
    load: Load,
    targets: Sequence[str],
    *,
    same_actor: bool,
    killed_at: float,
    back_at: float,
    window: tuple[float, float],
    next_strike: float,
) -> str:
    """The controller's process killed: the same detached actor comes back, and no request
    sent from the kill (less a client timeout: one in flight) to the hold's end failed; a
    request still in flight at the next strike is that strike's."""
    j.require(same_actor, "the controller came back as another actor, not the same restarted")
    no_failures_sent(j, "SERVE-05", load, targets, window, next_strike=next_strike)
    return (
        f"the same controller actor back {back_at - killed_at:.1f} s after the kill, the same "
        "replicas, no request failed"
    )


@dataclass(frozen=True)
class ReplicaKill:
    """What the run recorded of SERVE-01's strike on a replica's process."""

    killed_at: float
    #: When the strike was verified (the process gone).
    dead_at: float
    #: The replica's id as the controller's log names it, and its node (whose proxy the new
    #: replica answers through: a proxy prefers the replica on its own node).
    uid: str
    node: str
    #: When the observer first saw a new replica ALIVE (None: never).
    new_alive: float | None
    #: The new replica actors: actor id → actor name (``SERVE_REPLICA::app#dep#<uid>``).
    replaced: Mapping[str, str]
    #: The traffic window judged: from the end of SERVE-05's hold to the end of this one.
    window: tuple[float, float]


@dataclass(frozen=True)
class ReplicaBounds:
    """SERVE-01's bounds from the knobs: the first check after the kill (``detect_s``), and
    the new replica ALIVE (``replica_s``: detection, the replacement's start)."""

    detect_s: float
    replica_s: float


REPLICA_RULES = {
    "crashed": r"Actor for Replica\(id='{rid}'.*crashed, marking it unhealthy",
    "failed": r"Health check for Replica\(id='{rid}'.* failed",
    "no_response": r"Didn't receive health check response for replica Replica\(id='{rid}'",
    "threshold": r"Replica\(id='{rid}'.* failed the health check \d+ times in a row",
    "stopping": r"Replica\(id='{rid}'.* failed health check, stopping it",
    "starting": r"Starting Replica\(id='(\w+)', deployment='Echo', app='echo'\)",
    "started": r"Replica\(id='(\w+)', deployment='Echo', app='echo'\) started successfully",
}


@verdict("SERVE-01")
def replica_replaced(
    j: Judging,
    lines: Sequence[dict[str, Any]],
    load: Load,
    kill: ReplicaKill,
    bounds: ReplicaBounds,
    targets: Sequence[str],
    request_timeout_s: float,
) -> str:
    """A replica's process killed under load. From the controller's log (``REPLICA_RULES``):
    exactly one "Actor for <replica> crashed, marking it unhealthy immediately" line
    (``ActorReplicaWrapper.check_health``, the ``ACTOR_CRASHED`` answer: no threshold), no
    failed or timed-out check of the replica before it (each is logged: a check that did not
    see the crash would have left one), the line after the kill and within one check of it;
    the replacement started in its wake, never before, and it is the new actor that serves.
    From the observer: the new replica ALIVE within the bound. From the client: only requests
    in flight on the victim failed (at most one per client thread), none sent after its death,
    and the new replica answered through its node's proxy."""
    _crash_seen(j, lines, kill, bounds)
    new_alive = j.found(kill.new_alive, "the observer never saw the new replica ALIVE")
    window = j.measure(
        "SERVE-01 kill → new replica ALIVE (s)",
        round(new_alive - kill.killed_at, 2),
        band=(0.0, bounds.replica_s),
        start=kill.killed_at,
    )
    j.require(
        window <= bounds.replica_s,
        f"the replica was replaced {window} s after the kill (bound {bounds.replica_s:.1f} s: "
        f"one check {bounds.detect_s:.1f} s, then the replacement's start)",
    )
    # From the end of SERVE-05's window: a request sent since is the replica kill's business,
    # and so is one sent before that was still in flight at the kill.
    t0, t1 = kill.window
    failed = {
        t: [
            f
            for f in failures(load, t, t0 - request_timeout_s, t1)
            if f["sent"] >= t0 or f["done"] > kill.killed_at
        ]
        for t in targets
    }
    in_flight = {t: [f for f in v if f["sent"] <= kill.dead_at] for t, v in failed.items()}
    later = {t: [f for f in v if f["sent"] > kill.dead_at] for t, v in failed.items()}
    lost = sum(len(v) for v in in_flight.values())
    j.measure(
        "SERVE-01 failed requests in flight at the kill", {t: len(v) for t, v in in_flight.items()}
    )
    j.measure("SERVE-01 failed requests sent after the kill", {t: len(v) for t, v in later.items()})
    j.measure(
        "SERVE-01 longest gap between answers (s)",
        {t: longest_gap(load, t, t0, t1) for t in targets},
    )
    # At most every client thread's one request can be in flight at once.
    threads = int(load["threads_per_target"]) * len(targets)
    j.require(lost <= threads, f"{lost} requests in flight failed, {threads} threads: {in_flight}")
    j.require(
        not any(later.values()),
        "requests sent after the replica's death failed: "
        f"{ {t: v[:5] for t, v in later.items() if v} }",
    )
    answered = {t: v["answered_by"] for t, v in load["targets"].items()}
    j.measure("SERVE-01 answers per replica actor", answered)
    j.require(
        bool(set(kill.replaced) & set(answered.get(kill.node, {}))),
        f"the new replica never answered through {kill.node}'s proxy",
    )
    return (
        f"crash seen by the first check after the kill, replaced; {lost} request(s) in "
        "flight failed, none after"
    )


def _crash_seen(
    j: Judging, lines: Sequence[dict[str, Any]], kill: ReplicaKill, bounds: ReplicaBounds
) -> None:
    crashed = rows_of(lines, "crashed")
    j.require(
        len(crashed) == 1, f"one 'crashed, marking it unhealthy' line for {kill.uid}: {lines}"
    )
    seen_at = float(crashed[0]["t"])
    window = j.measure(
        "SERVE-01 kill → the controller's crash line (s)",
        round(seen_at - kill.killed_at, 3),
        band=(0.0, bounds.detect_s),
        start=kill.killed_at,
    )
    j.require(window >= -STAMP_S, f"the crash was logged before the kill: {crashed[0]}")
    other_checks = [
        line
        for line in lines
        if line["rule"] in ("failed", "no_response", "threshold") and line["t"] <= seen_at
    ]
    j.require(
        not other_checks,
        f"checks of {kill.uid} failed before the crash was seen (not the first check): "
        f"{other_checks}",
    )
    j.require(
        window <= bounds.detect_s,
        f"the controller saw the crash {window} s after the kill; one health check is "
        f"{bounds.detect_s:.1f} s: {crashed[0]['line']}",
    )
    since = [line for line in lines if line["t"] >= kill.killed_at - STAMP_S]
    starts = [line for line in rows_of(since, "starting") if line["groups"][0] != kill.uid]
    early = [line for line in starts if line["t"] < seen_at - STAMP_S]
    j.require(not early, f"a replica was started before the crash was seen: {early}")
    j.require(bool(starts), f"no replica started after the crash line: {since}")
    new_uid = starts[0]["groups"][0]
    start_after = j.measure(
        "SERVE-01 crash line → 'Starting Replica' (s)", round(starts[0]["t"] - seen_at, 3)
    )
    j.require(
        start_after <= REPLACE_S,
        f"the replacement started {start_after} s after the crash was seen: {starts[0]}",
    )
    started = [line for line in rows_of(since, "started") if line["groups"][0] == new_uid]
    j.require(
        bool(started), f"no 'started successfully' line for the new replica {new_uid}: {since}"
    )
    j.measure(
        "SERVE-01 'Starting Replica' → 'started successfully' (s)",
        round(started[0]["t"] - starts[0]["t"], 3),
    )
    names = list(kill.replaced.values())
    j.require(
        any(n.endswith(f"#{new_uid}") for n in names),
        f"the replica started after the crash ({new_uid}) is not the new ALIVE actor: {names}",
    )


@dataclass(frozen=True)
class ProxyKill:
    """What the run recorded of SERVE-04's strike on a node's proxy."""

    killed_at: float
    #: When the strike was verified (the process gone).
    dead_at: float
    #: The node whose proxy was killed (its Ray id), and its name as the client targets it.
    node_id: str
    node: str
    #: When the observer first saw a new proxy ALIVE on the node (None: never).
    new_alive: float | None
    #: When the judged traffic window ends.
    end: float


@dataclass(frozen=True)
class ProxyChecks:
    """The proxy health checks in effect: Serve's threshold and period, the bound on one gap
    between checks (a period, a control-loop pass, the controller's lag), and on the node's
    proxy answering again (the threshold's gaps, the replacement's start)."""

    threshold: int
    period_s: float
    gap_s: float
    answer_s: float


PROXY_RULES = {
    "failed": r"(?:Unexpected error invoking health check for proxy|"
    r"Didn't receive health check response for proxy) on {nid}",
    "unhealthy": r"Proxy \S*{nid} failed the health check (\d+) times in a row",
    "shutting": r"Proxy on node '{nid}' is unhealthy",
    "starting": r"Starting proxy '\S*' on node '{nid}'",
}


@verdict("SERVE-04")
def proxy_replaced(
    j: Judging,
    lines: Sequence[dict[str, Any]],
    load: Load,
    kill: ProxyKill,
    checks: ProxyChecks,
    others: Sequence[str],
) -> str:
    """A node's proxy killed. From the controller's log (``PROXY_RULES``): after the kill,
    the threshold's failed health checks of the proxy ("Unexpected error invoking health
    check for proxy on <node>", or "Didn't receive health check response" on a timeout), each
    at least one period after the previous one's result and at most a gap's bound; the
    verdict ("Proxy … failed the health check <threshold> times in a row, marking it
    unhealthy") with the last of them; the new proxy ("Starting proxy '…' on node '<node>'")
    after the verdict, never before. From the observer and the client: a new proxy ALIVE, the
    node answering again within the bound, and no request through the ``others``' proxies
    failed."""
    _proxy_checks(j, lines, kill, checks)
    new_alive = j.found(kill.new_alive, f"the observer never saw a new proxy ALIVE on {kill.node}")
    j.measure(
        f"SERVE-04 kill → new proxy ALIVE on {kill.node} (s)", round(new_alive - kill.killed_at, 2)
    )
    back = j.found(
        first_ok(load, kill.node, kill.dead_at), f"{kill.node}'s proxy never answered again"
    )
    window = j.measure(
        f"SERVE-04 kill → {kill.node}'s proxy answers (s)",
        round(back - kill.killed_at, 2),
        band=(0.0, checks.answer_s),
        start=kill.killed_at,
    )
    j.measure(
        f"SERVE-04 requests refused by {kill.node} while its proxy was down",
        len(failures(load, kill.node, kill.killed_at, back)),
    )
    j.require(
        window <= checks.answer_s,
        f"{kill.node}'s proxy answered {window} s after the kill; {checks.threshold} checks "
        f"every {checks.period_s} s (bound {checks.answer_s:.1f} s with the proxy's start)",
    )
    no_failures_sent(j, "SERVE-04", load, others, (kill.killed_at, kill.end))
    return (
        f"a new proxy after {checks.threshold} failed checks one period apart, never before; "
        f"{', '.join(others)}'s proxy failed no request"
    )


def _proxy_checks(
    j: Judging, lines: Sequence[dict[str, Any]], kill: ProxyKill, checks: ProxyChecks
) -> None:
    since = [line for line in lines if line["t"] >= kill.killed_at - STAMP_S]
    verdicts = rows_of(since, "unhealthy")
    j.require(len(verdicts) == 1, f"one 'marking it unhealthy' line for the proxy: {since}")
    given = verdicts[0]
    j.measure("SERVE-04 failed checks in a row at the verdict", given["groups"][0])
    j.require(
        int(given["groups"][0]) == checks.threshold,
        f"the proxy was marked unhealthy after {given['groups'][0]} failed checks; "
        f"PROXY_HEALTH_CHECK_UNHEALTHY_THRESHOLD is {checks.threshold}: {given['line']}",
    )
    failed = [line for line in rows_of(since, "failed") if line["t"] <= given["t"] + STAMP_S]
    times = [float(line["t"]) for line in failed]
    j.measure(
        "SERVE-04 failed checks after the kill (s after it)",
        [round(t - kill.killed_at, 3) for t in times],
    )
    j.require(
        len(failed) == checks.threshold,
        f"{len(failed)} failed proxy checks logged up to the verdict; the threshold is "
        f"{checks.threshold}: {failed}",
    )
    gaps = [round(b - a, 3) for a, b in itertools.pairwise([kill.killed_at, *times])]
    j.measure("SERVE-04 kill → first failed check, then between failed checks (s)", gaps)
    j.require(
        -STAMP_S <= gaps[0] <= checks.gap_s,
        f"the first failed check came {gaps[0]} s after the kill (at most one period and a "
        f"pass, {checks.gap_s:.1f} s): {failed[0]}",
    )
    short = [g for g in gaps[1:] if g < checks.period_s - STAMP_S]
    j.require(
        not short,
        f"failed checks {gaps[1:]} s apart; a check starts PROXY_HEALTH_CHECK_PERIOD_S "
        f"({checks.period_s} s) after the last one's result at the earliest",
    )
    long = [g for g in gaps[1:] if g > checks.gap_s]
    j.require(not long, f"failed checks {gaps[1:]} s apart (bound {checks.gap_s:.1f} s)")
    # The verdict is logged in the call that read the threshold's failure
    # (``ProxyState._reconcile_internal``: ``is_healthy`` logs the error, then
    # ``try_update_status`` the verdict): right after it, a pass's work at most.
    j.require(
        -STAMP_S <= given["t"] - times[-1] <= CONTROLLER_LAG_S,
        f"the verdict is given with the threshold's failure, not later: {given}, {failed[-1]}",
    )
    starts = rows_of(since, "starting")
    early = [line for line in starts if line["t"] < given["t"] - STAMP_S]
    j.require(not early, f"a new proxy was started before the verdict: {early} ({given})")
    j.require(bool(starts), f"no new proxy started on the node after the verdict: {since}")
    replaced = j.measure(
        "SERVE-04 verdict → 'Starting proxy' (s)", round(starts[0]["t"] - given["t"], 3)
    )
    j.measure("SERVE-04 kill → the controller's verdict (s)", round(given["t"] - kill.killed_at, 3))
    j.require(replaced <= REPLACE_S, f"the new proxy started {replaced:.2f} s after the verdict")
