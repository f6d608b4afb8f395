"""GCS-07 as a pure verdict: how the GCS ends when its Redis dies, from its own log.

The record: the GCS's log lines about Redis after the kill (``redis_context.cc``: each failed
attempt "Redis request [CMD] failed due to error … N retries left.", and the fatal end "Failed
to run redis cmds: [CMD] for N times."), its failed internal checks and the signal handler's
line; the Redis knobs from the running ``gcs_server``'s ``--config_list``; when Redis was
killed, when its container was seen exited, and when the GCS was seen gone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Judging, RayCrashed, verdict

#: Ray stamps its log lines in milliseconds (``[2026-12-04 12:38:06,111 …``), truncated: two
#: stamps compared can be up to 2 ms off the instants they record.
STAMP_S = 0.002
#: How far past its backoff schedule (3.5 s) the fatal line may come. Each retry waits on an
#: asio timer of the GCS's event loop, so a starved loop fires each late. Measured: the fatal
#: 0.02 s past the schedule on an idle host (3 runs, 4 December 2026); 0.04-0.50 s past it
#: after its own request's first failure and 0.04-0.74 s after the first failed PING (8 runs,
#: 6 December 2026; the 0.74 s with the head's processes stalled 1.6 s of 5.4 s for a CPU).
#: 1 s: the worst measured, rounded up to one redis_retry_max_ms.
BACKOFF_OVERSHOOT_S = 1.0
#: The lines the GCS logs about Redis (redis_context.cc): a failed request and the fatal end.
REQUEST_FAILED = re.compile(r"Redis request \[(?P<cmd>.*)\] failed due to error (?P<error>.*)\. ")
REDIS_FATAL = re.compile(r"Failed to run redis cmds: \[(?P<cmd>.*)\] for (?P<times>\d+) times\.")
#: A failed RAY_CHECK (every one starts "An unexpected system state has occurred. You have
#: likely discovered a bug in Ray", then "Check failed:"), and the failure signal handler's
#: line (absl: "*** SIGSEGV received at time=…"), which follows any fatal end too (SIGABRT).
CHECK_FAILED = "Check failed:"
SIGNAL_LINE = re.compile(r"\*\*\* (?P<signal>SIG[A-Z]+) received at time=(?P<at>\d+)")


class GcsCrashedOnLostRedis(RayCrashed):
    """GCS-07's finding: with its Redis dead, the GCS ended some other way than the one Ray's
    source states (a request's retries spent, ``Failed to run redis cmds``): on a failed
    internal check (a ``RAY_CHECK``: ``redis_async_context_ must not be NULL``, which Ray
    itself calls a likely bug), on a signal, or with no line of its own. Raised only once
    Redis is proven dead, the GCS gone and its log showing it saw Redis fail."""

    claims: ClassVar[tuple[str, ...]] = ("GCS-07",)


@dataclass(frozen=True)
class LogLine:
    #: Wall clock from Ray's stamp; None for an unstamped line (the signal handler's).
    t: float | None
    text: str


@dataclass(frozen=True)
class GcsEnd:
    """How the GCS ended, read from its log: ``fatal`` (Ray's stated end, a request's retries
    spent), ``check`` (a failed RAY_CHECK), ``signal`` (only the signal handler's line) or
    ``silent`` (no line at all); ``line`` is the line that says so (the last failed request
    for a silent end)."""

    how: str
    line: LogLine


def gcs_end(lines: Sequence[LogLine], failed: Sequence[LogLine]) -> GcsEnd:
    """The first terminal line of ``lines`` (stamped, oldest first), else the signal line,
    else silence after the last of ``failed``."""
    for line in lines:
        if line.t is not None and REDIS_FATAL.search(line.text):
            return GcsEnd("fatal", line)
        if line.t is not None and CHECK_FAILED in line.text:
            return GcsEnd("check", line)
    signal = next((line for line in lines if SIGNAL_LINE.search(line.text)), None)
    return GcsEnd("signal", signal) if signal else GcsEnd("silent", failed[-1])


def retry_delays_s(knobs: Mapping[str, int]) -> list[float]:
    """The waits RedisRequestContext puts between a request's attempts: ``pending_retries_``
    starts at ``num_redis_request_retries`` + 1, each failed attempt waits the backoff's
    current delay (then multiplies it, capped), and the run after the last one is fatal."""
    delay, delays = knobs["redis_retry_base_ms"], []
    for _ in range(knobs["num_redis_request_retries"] + 1):
        delays.append(delay / 1000)
        delay = min(delay * knobs["redis_retry_multiplier"], knobs["redis_retry_max_ms"])
    return delays


@dataclass(frozen=True)
class RedisKill:
    """When Redis was killed, when its container was seen exited (dead by then), and when
    the GCS was seen gone."""

    killed_at: float
    dead_by: float
    gone_at: float


@verdict("GCS-07")
def exits_on_lost_redis(
    j: Judging, knobs: Mapping[str, int], lines: Sequence[LogLine], kill: RedisKill
) -> str:
    """The GCS health-checks its Redis every ``gcs_redis_heartbeat_interval_milliseconds``
    and crashes itself when a check fails: the first PING after Redis's death fails within
    one period, and once a request's retries are spent on the backoff schedule (never sooner)
    the GCS exits on ``Failed to run redis cmds: [...] for N times.`` (ray_config_def.h,
    redis_context.cc). Another end (a ``RAY_CHECK``, a signal, silence) is the finding
    :class:`GcsCrashedOnLostRedis`; a GCS that logged no failed request cannot be judged."""
    failed = [x for x in lines if x.t is not None and REQUEST_FAILED.search(x.text)]
    if not failed:
        j.unknown(
            "the GCS exited without logging a failed Redis request after the kill: its exit "
            "cannot be told from Redis's death (see 'GCS-07 the GCS's Redis lines')"
        )
    first_failure = _stamp(failed[0])
    j.measure(
        "GCS-07 Redis kill → first failed Redis request (s)",
        round(first_failure - kill.killed_at, 3),
    )
    j.measure("GCS-07 first failed request", failed[0].text[-200:])
    end = gcs_end(lines, failed)
    j.measure("GCS-07 the GCS ended on", end.how)
    j.measure("GCS-07 the GCS's last word", end.line.text[-300:])
    # Redis is dead (verified), the GCS gone (polled) and its log shows it saw Redis fail:
    # the fault reached the GCS; any end but the fatal line is a crash inside Ray.
    after = f"{end.line.t - first_failure:.3f} s" if end.line.t is not None else "unstamped"
    j.require(
        end.how == "fatal",
        f"the GCS ended on {end.how!r} ({after} after its first failed Redis request), not on "
        f"'Failed to run redis cmds': {end.line.text[-300:]!r} (see 'GCS-07 the GCS's Redis "
        "lines')",
        GcsCrashedOnLostRedis,
    )
    fatal = j.found(REDIS_FATAL.search(end.line.text), f"no fatal line: {end.line.text}")
    ended_at = _stamp(end.line)
    period_s = knobs["gcs_redis_heartbeat_interval_milliseconds"] / 1000
    ping = j.found(
        next((x for x in failed if "Redis request [PING] failed" in x.text), None),
        "no failed PING before the GCS's fatal line",
    )
    # 1. The health check: the first PING after Redis's death fails within one period.
    latest = round(kill.dead_by - kill.killed_at + period_s, 3)
    detected = j.measure(
        "Redis kill → first failed PING (s)",
        round(_stamp(ping) - kill.killed_at, 3),
        band=(0.0, latest),
        start=kill.killed_at,
    )
    j.require(
        -STAMP_S <= detected <= latest + STAMP_S,
        f"the first failed PING came {detected} s after the kill; Redis was dead by "
        f"{kill.dead_by - kill.killed_at:.3f} s (its container seen exited) and the check runs "
        f"every {period_s} s (gcs_redis_heartbeat_interval_milliseconds)",
    )
    # 2. The exit: on the backoff schedule of the request the fatal line names.
    spent = _spent_retries(j, knobs, failed, fatal, ended_at, _stamp(ping))
    j.require(
        ended_at <= kill.gone_at + STAMP_S, "the GCS was gone before it logged its fatal line"
    )
    return (
        f"first failed PING {detected} s after the kill (one period {period_s} s), the GCS "
        f"ended on [{fatal['cmd'][:40]}]'s spent retries {spent} s after its first failure"
    )


def _spent_retries(
    j: Judging,
    knobs: Mapping[str, int],
    failed: Sequence[LogLine],
    fatal: re.Match[str],
    ended_at: float,
    ping_at: float,
) -> float:
    """GCS-07's exit: the request the fatal line names spent its retries on the backoff
    schedule (never sooner), and the GCS ended there, by the first failed PING's own
    schedule at the latest. Returns the seconds from that request's first failure."""
    j.require(
        int(fatal["times"]) == knobs["num_redis_request_retries"],
        f"the fatal line counts {fatal['times']} tries; num_redis_request_retries is "
        f"{knobs['num_redis_request_retries']}: {fatal.group(0)}",
    )
    delays = retry_delays_s(knobs)
    backoff_s = sum(delays)
    chain = j.found(
        next((x for x in failed if f"Redis request [{fatal['cmd']}] failed" in x.text), None),
        f"no failed attempt of [{fatal['cmd']}] before its fatal line",
    )
    spent = j.measure(
        f"GCS-07 [{fatal['cmd'][:40]}] first failure → fatal (s)",
        round(ended_at - _stamp(chain), 3),
        band=(backoff_s, backoff_s + BACKOFF_OVERSHOOT_S),
        start=_stamp(chain),
    )
    j.require(
        backoff_s - STAMP_S <= spent <= backoff_s + BACKOFF_OVERSHOOT_S,
        f"[{fatal['cmd']}] ended the GCS {spent} s after its first failure; its retries wait "
        f"{backoff_s:.1f} s in all ({delays} s: redis_retry_base_ms, redis_retry_multiplier, "
        "redis_retry_max_ms)",
    )
    # The failed health check's own retries end the GCS by then at the latest, if no other
    # request's did first.
    after_ping = j.measure(
        "first failed PING → fatal (s)",
        round(ended_at - ping_at, 3),
        band=(0.0, backoff_s + BACKOFF_OVERSHOOT_S),
        start=ping_at,
    )
    j.require(
        after_ping <= backoff_s + BACKOFF_OVERSHOOT_S,
        f"the GCS ended {after_ping} s after its first failed PING; that PING's retries wait "
        f"{backoff_s:.1f} s in all",
    )
    return float(spent)


def _stamp(line: LogLine) -> float:
    """A stamped line's time (the lines judged here are filtered stamped)."""
    if line.t is None:
        raise ValueError(f"expected a stamped log line, got {line}")
    return line.t


# -- GCS-02, GCS-03 (and GCS-06 on RocksDB): an outage, then a restart from the store ----------


@dataclass(frozen=True)
class Outage:
    """What the outage experiment recorded: the GCS killed and the head restarted (times),
    what the driver saw during the outage (``checked``: the bounded gets, the placement
    group's call) and after it (``seen``: the running task, the actor, the object, what
    waited), the late node while it waited, the worker processes worker-2 started during the
    outage, the workers' node ids before, and the node ids ALIVE after."""

    gcs_at: float
    restart_at: float
    checked: Mapping[str, Any]
    seen: Mapping[str, Any]
    late_waiting: Mapping[str, Any]
    spawned: Sequence[str]
    workers_before: Mapping[str, str]
    late_id: str | None
    alive_after: frozenset[str]


@verdict("GCS-02")
def outage_keeps_work(j: Judging, run: Outage, get_s: float, after_s: float, tick_s: float) -> str:
    """While the GCS is down running work continues (a task running across the kill keeps
    ticking and its result reaches the driver before the restart; an existing actor serves;
    an object owned on worker-2 stays readable) and what needs the GCS waits (an actor
    creation and a task needing a new worker process: their bounded get times out after
    ``get_s``; a placement group's call blocks; a node starting waits to register)."""
    seen = run.seen
    task = seen.get("running_task") or {}
    j.require(bool(task), f"the running task must finish during the outage: {seen}")
    j.require(
        task["started_at"] < run.gcs_at < task["signal_at"] <= task["last_tick_at"],
        f"the task must be running across the kill at {run.gcs_at:.2f}: {task}",
    )
    j.require(task["ticks_after_signal"] >= 0.5 * after_s / tick_s, f"task stalled: {task}")
    j.require(task["node_id"] == run.workers_before["worker-1"], f"the task ran elsewhere: {task}")
    j.require(
        seen["running_task_at"][1] < run.restart_at,
        "the running task's result must reach the driver before the GCS is restarted",
    )
    j.measure(
        "GCS kill → running task's last tick (s)", round(task["last_tick_at"] - run.gcs_at, 2)
    )
    j.require(seen.get("keeper_during") == 2, f"the existing actor must keep serving: {seen}")
    j.require(
        seen.get("object_during") is True,
        f"the object owned by an actor on worker-2 must stay readable from the driver: {seen}",
    )
    # An actor creation and a task that needs a new worker process return a ref at once; the
    # bounded get of it times out.
    for name in ("actor_creation", "worker_start"):
        during = j.measure(f"{name} during the outage", run.checked.get(name + "_during"))
        error = (during or {}).get("error") or {}
        j.require(
            error.get("type") == "GetTimeoutError" and during["get_s"] >= get_s * 0.95,
            f"{name} must wait while the GCS is down (GetTimeoutError after {get_s} s): {during}",
        )
    j.measure("worker processes started on worker-2 during the outage", list(run.spawned))
    j.require(
        bool(run.spawned), "worker-2's raylet must start a worker process for the task (it waits)"
    )
    # placement_group() is a synchronous GCS call (gcs_server_request_timeout_seconds, 60 s by
    # default): the wait is in the call itself, so there is no ref to get until the GCS is back.
    pg = j.measure("placement_group during the outage", run.checked.get("placement_group_during"))
    j.require(
        (pg or {}).get("submit_blocked_s", 0) >= get_s,
        f"creating a placement group must wait while the GCS is down: {pg}",
    )
    j.require(
        dict(run.late_waiting) == {"raylet": [], "ray_start_exited": False},
        f"a node starting during the outage must wait to register: {dict(run.late_waiting)}",
    )
    return (
        f"the running task kept ticking ({task['ticks_after_signal']} ticks) and returned, the "
        "actor served, the object stayed readable; actor and worker starts, a placement group "
        "and a joining node waited"
    )


def _reloaded(j: Judging, run: Outage) -> str:
    """Restarted from its store, the GCS serves what waited (the actor creation, the
    placement group — whose call returns only after the restart — and the worker start), the
    detached named actor is there with its state, every worker keeps its node id, and the
    node that started during the outage registers."""
    for name in ("actor_creation", "placement_group", "worker_start"):
        after = j.measure(f"{name} after recovery", run.seen[name + "_after"])
        j.require(bool(after.get("ok")), f"{name} must complete once the GCS is back: {after}")
    returned = run.seen["placement_group_after"]["submitted_at"]
    j.require(returned > run.restart_at, "placement_group() returned before the GCS restarted")
    j.measure("head restart → placement_group() returns (s)", round(returned - run.restart_at, 2))
    j.require(run.seen["keeper_after"] == 3, "detached named actor reachable with its state")
    lost = {n: i for n, i in run.workers_before.items() if i not in run.alive_after}
    j.require(not lost, f"workers must keep their node ids across the GCS restart: {lost}")
    j.require(
        run.late_id is not None and run.late_id in run.alive_after,
        "the node that started during the outage registered",
    )
    return (
        "what waited completed after the restart, the named actor kept its state, every worker "
        "kept its node id, the late node registered"
    )


@verdict("GCS-03")
def restart_reloads(j: Judging, run: Outage) -> str:
    """The GCS restarted from Redis reloads its state (:func:`_reloaded`)."""
    return _reloaded(j, run)


@verdict("GCS-06")
def rocksdb_reloads(j: Judging, run: Outage) -> str:
    """The GCS restarted from RocksDB "recovers the way the Redis backend does"
    (:func:`_reloaded`)."""
    return _reloaded(j, run)


# -- GCS-04: the GCS away longer than the reconnect timeout -------------------------------------


@dataclass(frozen=True)
class GcsAway:
    """What GCS-04's run recorded: the kill (inject, and when it was verified: it landed in
    between), each old node's raylet's first exit cause and its time (None: no such line), the
    driver's exit (``driver_exit``), and the old nodes' states once the head was back."""

    killed_at: float
    landed_at: float
    causes: Mapping[str, tuple[str, float] | None]
    driver: Mapping[str, Any]
    after: Mapping[str, Mapping[str, Any]]


#: The raylet's and driver's line when they give up on the GCS (gcs_rpc_client/rpc_client.h).
RECONNECT_TIMEOUT = "Failed to connect to GCS within"


@verdict("GCS-04")
def gives_up_after_reconnect_timeout(
    j: Judging, run: GcsAway, reconnect_s: float, latest_s: float, clock_slack_s: float
) -> str:
    """Every old raylet and the driver give up on the GCS with Ray's line ("Failed to connect
    to GCS within N seconds"), each no sooner than ``reconnect_s`` after the kill's inject and
    no later than ``latest_s`` after its verification; the driver exits with an error after
    its line; once the GCS is back (reloaded from Redis) their nodes are DEAD."""
    bounds = f"[{reconnect_s:g} s from the inject, {latest_s:g} s from the verified kill]"
    j.measure("GCS kill: inject → verified (s)", round(run.landed_at - run.killed_at, 2))

    def within(what: str, at: float) -> None:
        j.measure(f"GCS kill → {what} (s)", round(at - run.killed_at, 2))
        over = j.measure(
            f"{what}: past the timeout, from the verified kill (s)",
            round(at - run.landed_at - reconnect_s, 2),
        )
        j.require(
            at - run.killed_at >= reconnect_s and at - run.landed_at <= latest_s,
            f"{what} {at - run.killed_at:.2f} s after the kill ({over} s past the timeout from "
            f"the verified kill); Ray's bound is {bounds}",
        )

    for name, cause in run.causes.items():
        found = j.found(cause, f"{name}'s raylet logged no exit cause")
        j.require(
            found[0] == RECONNECT_TIMEOUT, f"{name}'s raylet exited for another reason: {found}"
        )
        within(f"{name} raylet gives up", found[1])
    exited = run.driver
    j.measure("driver's exit", dict(exited))
    j.require(exited["exit_code"] not in (0, None), f"the driver must exit with an error: {exited}")
    given_up = j.found(
        exited["logged"].get(RECONNECT_TIMEOUT),
        f"the driver's log does not say it gave up on the GCS: {exited}",
    )
    within("driver gives up", given_up)
    # The host saw the driver's process end after its line (the same clock).
    j.measure("GCS kill → driver exits, host (s)", round(exited["at"] - run.killed_at, 2))
    j.require(
        exited["at"] >= given_up - clock_slack_s, f"the driver ended before its line: {exited}"
    )
    alive = {n: s for n, s in run.after.items() if s.get("state") != "DEAD"}
    j.require(not alive, f"old nodes not DEAD once the GCS was back: {alive}")
    return (
        f"{len(run.causes)} raylets and the driver gave up within {bounds} with Ray's line; "
        "their nodes DEAD once the GCS was back"
    )


# -- GCS-01, GCS-05: a head without a store is a new cluster -----------------------------------


@verdict("GCS-01")
def head_death_ends_the_cluster(
    j: Judging, driver_failed: bool, known: Mapping[str, str], old_ids: frozenset[str]
) -> str:
    """Without GCS FT the head's death fails the whole cluster: the driver loses it (its
    process or its work fails), and the head started again is a different cluster — its GCS
    knows only itself, none of the old nodes, not even as DEAD."""
    j.require(driver_failed, "the driver must lose the cluster")
    j.measure("GCS-01 nodes the replacement head's GCS knows", dict(known))
    j.require(list(known.values()) == ["ALIVE"], f"only the new head is known: {dict(known)}")
    j.require(
        not set(known) & old_ids, f"the replacement must not know the old nodes: {dict(known)}"
    )
    return "the driver lost the cluster; the replacement head's GCS knows only itself"


#: The raylet's line when the GCS answers its liveness self-check as another cluster.
WRONG_CLUSTER = "GCS returned an authentication error"


@dataclass(frozen=True)
class NewCluster:
    """What GCS-05's run recorded: when the head restarted and was back, each old raylet's
    first exit cause and its time, the old driver's GCS calls (names tried, and those that
    returned), its exit (``driver_exit``), the old node ids, and the node ids ALIVE after."""

    restart_at: float
    back_at: float
    causes: Mapping[str, tuple[str, float] | None]
    tried: Sequence[str]
    calls: Mapping[str, Mapping[str, Any]]
    driver: Mapping[str, Any]
    old_ids: frozenset[str]
    alive_after: frozenset[str]


@verdict("GCS-05")
def new_cluster_refuses_the_old(
    j: Judging, run: NewCluster, self_check_s: float, backoff_s: float, lag_s: float
) -> str:
    """A GCS restarted without persistence is a new cluster (a new cluster id): each old
    raylet exits on ``WrongClusterID`` within one liveness self-check, a reconnect backoff and
    the exit's lag of the new GCS; the old driver's GCS client is refused with
    ``WrongClusterID`` and every GCS call it makes fails; no old node id is ALIVE."""
    latest_s = self_check_s + backoff_s + lag_s
    for name, cause in run.causes.items():
        found = j.found(cause, f"{name}'s raylet logged no exit cause")
        j.require(
            found[0] == WRONG_CLUSTER,
            f"{name}'s raylet must exit on the new cluster id, it logged {found[0]!r}",
        )
        window = j.measure(
            f"head back → {name} raylet exits on WrongClusterID (s)",
            round(found[1] - run.back_at, 2),
        )
        j.require(
            window <= latest_s,
            f"{name}'s raylet exited {window} s after the new GCS; it checks every "
            f"{self_check_s:.0f} s (raylet_liveness_self_check_interval_ms), and its channel "
            f"reconnects within {backoff_s:g} s: bound {latest_s:g} s",
        )
    exited = run.driver
    told = exited["logged"].get("WrongClusterID")
    j.require(
        told is not None and told >= run.restart_at,
        f"the old driver's GCS client must be refused with WrongClusterID: {dict(exited)}",
    )
    j.measure("head restart → old driver told WrongClusterID (s)", round(told - run.restart_at, 2))
    j.require(bool(run.tried), "the old driver made no GCS call")
    for name in run.tried:
        call = run.calls.get(name)
        if call is None:  # the process ended inside the call (2.60.0)
            j.require(
                exited["exit_code"] not in (0, None), f"{name} never returned: {dict(exited)}"
            )
            continue
        j.require(
            not call["ok"] and "WrongClusterID" in str(call["error"]),
            f"the old driver's {name} must fail with WrongClusterID: {dict(call)}",
        )
    j.require(not run.alive_after & run.old_ids, "no old node id is ALIVE in the new cluster")
    return (
        f"{len(run.causes)} old raylets exited on WrongClusterID within {latest_s:g} s of the "
        "new GCS; the old driver was refused with WrongClusterID"
    )
