"""GCS-02, -03, -04 and -06 on what their runs record, and GCS-07's verdict on the GCS's own log lines, as redis_context.cc writes them (no Docker):
Ray's stated end, a crash inside Ray (the finding), an early or late end, and a log that
cannot decide."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chaos.testing import CheckFailed, MissingEvidence
from experiments.verdicts.gcs import (
    RECONNECT_TIMEOUT,
    WRONG_CLUSTER,
    GcsAway,
    GcsCrashedOnLostRedis,
    LogLine,
    NewCluster,
    Outage,
    RedisKill,
    exits_on_lost_redis,
    gives_up_after_reconnect_timeout,
    head_death_ends_the_cluster,
    new_cluster_refuses_the_old,
    outage_keeps_work,
    restart_reloads,
    retry_delays_s,
    rocksdb_reloads,
)

KNOBS = {
    "gcs_redis_heartbeat_interval_milliseconds": 100,
    "num_redis_request_retries": 5,
    "redis_retry_base_ms": 100,
    "redis_retry_multiplier": 2,
    "redis_retry_max_ms": 1000,
}
T0 = 1_796_500_000.0
KILL = RedisKill(killed_at=T0, dead_by=T0 + 0.3, gone_at=T0 + 6.0)
PREFIX = "(gcs_server) redis_context.cc:270: "


def attempts(cmd: str, first: float, delays: list[float]) -> list[LogLine]:
    """A request's failed attempts, the backoff between them, counting its retries down."""
    lines, t = [], first
    for left, delay in zip(range(len(delays) - 1, -1, -1), delays, strict=True):
        lines.append(
            LogLine(
                round(t, 3),
                f"{PREFIX}Redis request [{cmd}] failed due to error Redis connection "
                f"unavailable. {left} retries left.",
            )
        )
        t += delay
    return lines


def fatal(cmd: str, at: float) -> LogLine:
    return LogLine(
        round(at, 3),
        f"(gcs_server) redis_context.cc:300: Failed to run redis cmds: [{cmd}] for 5 times.",
    )


def test_the_backoff_schedule_is_rays() -> None:
    assert retry_delays_s(KNOBS) == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_the_stated_end_holds() -> None:
    ping = attempts("PING", T0 + 0.35, retry_delays_s(KNOBS))
    held = exits_on_lost_redis(KNOBS, [*ping, fatal("PING", T0 + 0.35 + 3.62)], KILL)
    assert held.held, held.reason
    measured = {m.name: m.value for m in held.measured}
    assert measured["GCS-07 [PING] first failure → fatal (s)"] == 3.62
    assert measured["Redis kill → first failed PING (s)"] == 0.35


def test_a_crash_inside_the_redis_client_is_the_finding() -> None:
    ping = attempts("PING", T0 + 0.35, [0.1])
    check = LogLine(
        T0 + 0.5,
        "(gcs_server) redis_async_context.cc:64: Check failed: redis_async_context_ redis_async_context_ must not be NULL",
    )
    crashed = exits_on_lost_redis(KNOBS, [*ping, check], KILL)
    assert crashed.outcome == "failed"
    assert isinstance(crashed.error(), GcsCrashedOnLostRedis)
    assert "ended on 'check'" in crashed.reason
    silent = exits_on_lost_redis(KNOBS, ping, KILL)
    assert isinstance(silent.error(), GcsCrashedOnLostRedis)
    assert "ended on 'silent'" in silent.reason


def test_an_early_end_or_a_late_check_fails_the_claim() -> None:
    ping = attempts("PING", T0 + 0.35, retry_delays_s(KNOBS)[:3])
    early = exits_on_lost_redis(KNOBS, [*ping, fatal("PING", T0 + 0.35 + 1.0)], KILL)
    assert early.outcome == "failed"
    assert type(early.error()) is CheckFailed  # not the finding: Ray's end, on the wrong clock
    assert "its retries wait 3.5 s in all" in early.reason
    late = attempts("PING", T0 + 0.9, retry_delays_s(KNOBS))
    slow = exits_on_lost_redis(KNOBS, [*late, fatal("PING", T0 + 0.9 + 3.6)], KILL)
    assert slow.outcome == "failed"
    assert "the check runs every 0.1 s" in slow.reason


def test_a_log_without_a_failed_request_cannot_decide() -> None:
    unknown = exits_on_lost_redis(KNOBS, [fatal("PING", T0 + 4)], KILL)
    assert unknown.outcome == "unknown"
    assert isinstance(unknown.error(), MissingEvidence)


# -- GCS-02, GCS-03, GCS-06 ---------------------------------------------------------------------

WORKERS = {"worker-1": "n1", "worker-2": "n2"}
OUTAGE = Outage(
    gcs_at=T0 + 5,
    restart_at=T0 + 30,
    checked={
        "actor_creation_during": {"error": {"type": "GetTimeoutError"}, "get_s": 5.01},
        "worker_start_during": {"error": {"type": "GetTimeoutError"}, "get_s": 5.02},
        "placement_group_during": {"submit_blocked_s": 20.3},
    },
    seen={
        "running_task": {
            "started_at": T0 + 2, "signal_at": T0 + 5.5, "last_tick_at": T0 + 11.6,
            "ticks_after_signal": 30, "node_id": "n1",
        },
        "running_task_at": [T0 + 2, T0 + 12],
        "keeper_during": 2, "object_during": True, "keeper_after": 3,
        "actor_creation_after": {"ok": True}, "worker_start_after": {"ok": True},
        "placement_group_after": {"ok": True, "submitted_at": T0 + 33},
    },
    late_waiting={"raylet": [], "ray_start_exited": False},
    spawned=["3 s: ray::IDLE"],
    workers_before=WORKERS,
    late_id="n9",
    alive_after=frozenset({"n1", "n2", "n9", "h2"}),
)  # fmt: skip


def test_an_outage_that_keeps_work_and_a_restart_that_reloads_hold() -> None:
    assert outage_keeps_work(OUTAGE, 5.0, 6.0, 0.2).held
    assert restart_reloads(OUTAGE).held
    assert rocksdb_reloads(OUTAGE).claim == "GCS-06"


def test_what_needs_the_gcs_answering_during_the_outage_fails_gcs02() -> None:
    answered = {**OUTAGE.checked, "actor_creation_during": {"ok": True, "get_s": 0.1}}
    verdict = outage_keeps_work(replace(OUTAGE, checked=answered), 5.0, 6.0, 0.2)
    assert verdict.outcome == "failed"
    assert "actor_creation must wait" in verdict.reason
    stalled: dict[str, Any] = {
        **OUTAGE.seen,
        "running_task": {**OUTAGE.seen["running_task"], "ticks_after_signal": 4},
    }
    assert "task stalled" in outage_keeps_work(replace(OUTAGE, seen=stalled), 5.0, 6.0, 0.2).reason


def test_a_worker_under_a_new_id_after_the_restart_fails_gcs03() -> None:
    renamed = replace(OUTAGE, alive_after=frozenset({"n1", "n7", "n9"}))
    verdict = restart_reloads(renamed)
    assert verdict.outcome == "failed"
    assert "worker-2" in verdict.reason
    early = {**OUTAGE.seen, "placement_group_after": {"ok": True, "submitted_at": T0 + 29}}
    assert "before the GCS restarted" in restart_reloads(replace(OUTAGE, seen=early)).reason


# -- GCS-04 -------------------------------------------------------------------------------------

AWAY = GcsAway(
    killed_at=T0,
    landed_at=T0 + 0.4,
    causes={"worker-1": (RECONNECT_TIMEOUT, T0 + 21.2), "driver": (RECONNECT_TIMEOUT, T0 + 21.5)},
    driver={"exit_code": 1, "at": T0 + 21.9, "logged": {RECONNECT_TIMEOUT: T0 + 21.4}},
    after={"worker-1": {"state": "DEAD"}, "driver": {"state": "DEAD"}},
)


def test_raylets_and_the_driver_giving_up_in_the_window_hold() -> None:
    held = gives_up_after_reconnect_timeout(AWAY, 20.0, 22.2, 0.5)
    assert held.held, held.reason


def test_giving_up_early_late_or_for_another_reason_fails_gcs04() -> None:
    early = replace(AWAY, causes={"worker-1": (RECONNECT_TIMEOUT, T0 + 15.0)})
    assert "Ray's bound is [20 s" in gives_up_after_reconnect_timeout(early, 20.0, 22.2, 0.5).reason
    other = replace(AWAY, causes={"worker-1": ("GCS consider this node to be dead", T0 + 21.0)})
    assert "another reason" in gives_up_after_reconnect_timeout(other, 20.0, 22.2, 0.5).reason
    silent = replace(AWAY, causes={"worker-1": None})
    assert (
        "logged no exit cause" in gives_up_after_reconnect_timeout(silent, 20.0, 22.2, 0.5).reason
    )
    clean = replace(AWAY, driver={**AWAY.driver, "exit_code": 0})
    assert "exit with an error" in gives_up_after_reconnect_timeout(clean, 20.0, 22.2, 0.5).reason


# -- GCS-01, GCS-05 -----------------------------------------------------------------------------


def test_a_replacement_head_that_knows_old_nodes_fails_gcs01() -> None:
    old = frozenset({"n1", "n2"})
    assert head_death_ends_the_cluster(True, {"h2": "ALIVE"}, old).held
    remembers = head_death_ends_the_cluster(True, {"h2": "ALIVE", "n1": "DEAD"}, old)
    assert remembers.outcome == "failed"
    assert "only the new head" in remembers.reason
    assert "lose the cluster" in head_death_ends_the_cluster(False, {"h2": "ALIVE"}, old).reason


NEW = NewCluster(
    restart_at=T0,
    back_at=T0 + 12,
    causes={"worker-1": (WRONG_CLUSTER, T0 + 14.5)},
    tried=["get_actor", "nodes"],
    calls={"get_actor": {"ok": False, "error": "RpcError: WrongClusterID"}},
    driver={"exit_code": 1, "logged": {"WrongClusterID": T0 + 12.8}},
    old_ids=frozenset({"n1"}),
    alive_after=frozenset({"h2"}),
)


def test_old_clients_refused_by_the_new_cluster_hold_and_a_late_exit_fails_gcs05() -> None:
    assert new_cluster_refuses_the_old(NEW, 60.0, 2.0, 1.2).held
    late = replace(NEW, causes={"worker-1": (WRONG_CLUSTER, T0 + 80)})
    verdict = new_cluster_refuses_the_old(late, 60.0, 2.0, 1.2)
    assert verdict.outcome == "failed"
    assert "bound 63.2 s" in verdict.reason
    answered = replace(NEW, calls={"get_actor": {"ok": True, "error": None}})
    assert (
        "must fail with WrongClusterID"
        in new_cluster_refuses_the_old(answered, 60.0, 2.0, 1.2).reason
    )
    kept = replace(NEW, alive_after=frozenset({"h2", "n1"}))
    assert "no old node id" in new_cluster_refuses_the_old(kept, 60.0, 2.0, 1.2).reason
