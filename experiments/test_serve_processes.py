"""Ray Serve's processes killed under load (docs: serve/production-guide/fault-tolerance,
serve/architecture): SERVE-05 the controller, SERVE-01 a replica, SERVE-04 a proxy.

One cluster, three strikes in turn, traffic through both workers' proxies throughout. Windows
are measured from the strike to what the observer saw (a new actor ALIVE) or the client saw,
against the knobs in effect: the deployment's ``health_check_period_s`` (:data:`PERIOD_S`),
the proxies' ``RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S`` (:data:`PROXY_PERIOD_S`) and Serve's
constants read inside the image. Where the controller logs what it decided (a crashed replica,
a failed proxy check, a verdict, a new replica or proxy started), both sides of the window come
from its own lines on the head. The verdicts: ``verdicts.serve``.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from chaos.testing import CheckFailed, Experiment, WorkloadError, holds_for, record, wait_until

from .serving import (
    AFTER_S,
    CONTROLLER,
    ECHO_REPLICA,
    JITTER,
    NEEDS_SERVE,
    PERIOD_S,
    PROXY,
    PROXY_PERIOD_S,
    REQUEST_TIMEOUT_S,
    SERVE_ENV,
    START_S,
    WORKERS,
    WORKERS_2,
    alive,
    answers_since,
    check_now,
    controller_log,
    deploy_echo,
    first_alive,
    node_name,
    one_per_worker,
    record_failures,
    replica_uid,
    serving,
    shutdown_serve,
    start_load,
    stop_load,
    struck,
)
from .verdicts.serve_processes import (
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
from .verdicts.serve_traffic import CONTROLLER_LAG_S, REPLACE_S, STAMP_S

# Serve's actors are killed by PID inside their node.
pytestmark = [pytest.mark.needs_tools("ps", "kill"), NEEDS_SERVE]


@pytest.mark.claim("SERVE-01", "SERVE-04", "SERVE-05")
@pytest.mark.cluster(env=SERVE_ENV, head={"num_cpus": 0}, workers=WORKERS_2)
def test_replica_proxy_and_controller_processes_killed_under_load(
    experiment: Experiment,
) -> None:
    """Two replicas (one per worker) under steady traffic through both workers' proxies.
    SERVE-05: the controller's process killed → restarted, no request fails, the same
    replicas. SERVE-01: one replica's process killed → the controller's log says the crash
    was seen by the first health check after the kill, within one period; a new replica
    starts; the other keeps serving; only requests in flight on the victim fail. SERVE-04:
    worker-1's proxy killed → the controller's log shows three failed checks one period
    apart, then the verdict, then a new proxy, never earlier; worker-2's proxy keeps
    accepting. SERVE-05 and SERVE-01 are judged (and recorded held) before the proxy is
    struck, with the client restarted for SERVE-04."""
    constants = deploy_echo(
        experiment, WORKERS, num_replicas=2, num_cpus=1, health_check_period_s=PERIOD_S,
        max_replicas_per_node=1,
    )["constants"]  # fmt: skip
    replicas = one_per_worker(experiment)
    run = start_load(experiment, WORKERS)
    kill_c, controller_back_at, serve05_end, same_actor = _kill_the_controller(experiment, replicas)
    kill_r, bounds, replaced, serve01_end = _kill_a_replica(experiment, replicas, constants)
    load = stop_load(experiment, run)
    record_failures(experiment, load, "client: failures (SERVE-05, SERVE-01)")
    experiment.judge(
        controller_restarted(
            load, WORKERS, same_actor=same_actor, killed_at=kill_c.injected_at,
            back_at=controller_back_at,
            window=(kill_c.injected_at - REQUEST_TIMEOUT_S, serve05_end),
            next_strike=kill_r.injected_at,
        )
    )  # fmt: skip
    victim = replicas["worker-1"]
    uid = replica_uid(victim)
    lines = controller_log(
        experiment, {k: v.format(rid=re.escape(uid)) for k, v in REPLICA_RULES.items()}
    )
    since = [x for x in lines if x["t"] >= kill_r.injected_at - STAMP_S]
    record(experiment, "SERVE-01 the controller's lines after the kill", since)
    record_kill = ReplicaKill(
        killed_at=kill_r.injected_at,
        dead_at=struck(experiment, kill_r),
        uid=uid,
        node="worker-1",
        new_alive=first_alive(
            experiment, ECHO_REPLICA, kill_r.injected_at, {r["actor_id"] for r in replicas.values()}
        ),
        replaced={k: str(v.get("name", "")) for k, v in replaced.items()},
        window=(serve05_end, serve01_end),
    )
    experiment.judge(replica_replaced(lines, load, record_kill, bounds, WORKERS, REQUEST_TIMEOUT_S))
    _kill_a_proxy(experiment, constants)
    shutdown_serve(experiment)


def _kill_the_controller(
    experiment: Experiment, replicas: dict[str, dict[str, Any]]
) -> tuple[Any, float, float, bool]:
    """SERVE-05's strike: the controller's process; waits for it back (a new process) and for
    the same replicas to serve. (the strike, when it was back, the hold's end, whether it
    came back as the same actor)"""
    before_ids = {r["actor_id"] for r in replicas.values()}
    (ctrl,) = alive(experiment, CONTROLLER)
    head = node_name(experiment, ctrl["node_id"])
    kill_c = experiment.nemesis.kill_worker(head, int(ctrl["pid"]))
    restarted: dict[str, Any] = {}

    def controller_back() -> None:
        rows = alive(experiment, CONTROLLER)
        if not rows or rows[0]["pid"] == ctrl["pid"]:
            raise CheckFailed(f"controller not back: {rows}")
        restarted.update(rows[0])

    wait_until(controller_back, START_S + 10, "the controller restarted (a new process)")
    back_at = time.time()
    experiment.measure(
        "SERVE-05 kill → controller ALIVE again, host poll (s)",
        round(back_at - kill_c.injected_at, 2),
    )
    experiment.measure("SERVE-05 controller num_restarts", restarted.get("num_restarts"))

    def same_replicas() -> None:
        now = {r["actor_id"] for r in alive(experiment, ECHO_REPLICA)}
        if now != before_ids:
            raise CheckFailed(f"replicas changed after the controller restart: {now}")

    holds_for(same_replicas, AFTER_S, "the same replica actors serve (no redeploy)", period=1.0)
    return kill_c, back_at, time.time(), restarted["actor_id"] == ctrl["actor_id"]


def _kill_a_replica(
    experiment: Experiment, replicas: dict[str, dict[str, Any]], constants: dict[str, Any]
) -> tuple[Any, ReplicaBounds, dict[str, Any], float]:
    """SERVE-01's strike: worker-1's replica's process; waits for its replacement while the
    other replica keeps serving. (the strike, the bounds, the new actors, the hold's end)"""
    before_ids = {r["actor_id"] for r in replicas.values()}
    victim = replicas["worker-1"]
    kill_r = experiment.nemesis.kill_worker("worker-1", int(victim["pid"]))
    replaced: dict[str, Any] = {}

    def replica_replaced_now() -> None:
        rows = alive(experiment, ECHO_REPLICA)
        ids = {r["actor_id"] for r in rows}
        if len(rows) != 2 or victim["actor_id"] in ids:
            raise CheckFailed(f"replicas: {ids}")
        replaced.update({r["actor_id"]: r for r in rows if r["actor_id"] not in before_ids})

    fraction = float(constants["CONTROLLER_HEALTH_CHECK_RECONCILIATION_FRACTION"])
    loop_s = float(constants["CONTROL_LOOP_INTERVAL_S"])
    # The crash is seen by the first check after the kill: the last check started at most one
    # randomized period before it (``_should_start_new_health_check``: period × U(0.9, 1.1)),
    # the next starts at the first pass that visits the replica after that (the dirty-set
    # sweep visits every replica once per FRACTION × period: ``_dirty_set_active_pairs``),
    # and its result is read at a later pass (``CONTROL_LOOP_INTERVAL_S``).
    detect = JITTER * PERIOD_S + fraction * PERIOD_S + loop_s + CONTROLLER_LAG_S
    bounds = ReplicaBounds(detect_s=detect, replica_s=detect + REPLACE_S + START_S)
    wait_until(replica_replaced_now, bounds.replica_s + 30, "a new replica replaces the killed one")
    survivor = replicas["worker-2"]["actor_id"]
    if survivor not in {r["actor_id"] for r in alive(experiment, ECHO_REPLICA)}:
        raise CheckFailed("SERVE-01: the other replica must be the same actor")
    return kill_r, bounds, replaced, time.time()


def _kill_a_proxy(experiment: Experiment, constants: dict[str, Any]) -> None:
    """SERVE-04: worker-1's proxy killed under a fresh client; judged once it answers again."""
    run = start_load(experiment, WORKERS, stop="load_stop_proxy")
    worker1_id = str(experiment.cluster.node("worker-1").node_id)
    (proxy,) = [r for r in alive(experiment, PROXY) if r["node_id"] == worker1_id]
    period = float(constants["PROXY_HEALTH_CHECK_PERIOD_S"])
    if period != PROXY_PERIOD_S:
        raise WorkloadError(
            f"set-up: RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S={PROXY_PERIOD_S} not in effect "
            f"(Serve reads {period})"
        )
    threshold = int(constants["PROXY_HEALTH_CHECK_UNHEALTHY_THRESHOLD"])
    kill_p = experiment.nemesis.kill_worker("worker-1", int(proxy["pid"]))
    # A proxy's next check starts once PROXY_HEALTH_CHECK_PERIOD_S has passed since the last
    # one's result was read (``ProxyState._reconcile_internal``: no jitter), at a pass of the
    # control loop; the threshold's failures in a row make it UNHEALTHY.
    gap = period + float(constants["CONTROL_LOOP_INTERVAL_S"]) + CONTROLLER_LAG_S
    checks = ProxyChecks(threshold, period, gap, threshold * gap + REPLACE_S + START_S)
    wait_until(
        lambda: check_now(answers_since(run, "worker-1", struck(experiment, kill_p) + 1)),
        checks.answer_s + 30,
        "worker-1's proxy answers again",
    )
    holds_for(serving(run, WORKERS), AFTER_S, "both proxies answer after the proxy's return")
    load = stop_load(experiment, run, stop="load_stop_proxy")
    record_failures(experiment, load, "client: failures (SERVE-04)")
    lines = controller_log(
        experiment, {k: v.format(nid=re.escape(worker1_id)) for k, v in PROXY_RULES.items()}
    )
    record(
        experiment,
        "SERVE-04 the controller's lines after the kill",
        [x for x in lines if x["t"] >= kill_p.injected_at - STAMP_S],
    )
    kill = ProxyKill(
        killed_at=kill_p.injected_at,
        dead_at=struck(experiment, kill_p),
        node_id=worker1_id,
        node="worker-1",
        new_alive=first_alive(
            experiment, PROXY, kill_p.injected_at, {proxy["actor_id"]}, worker1_id
        ),
        end=time.time(),
    )
    experiment.judge(proxy_replaced(lines, load, kill, checks, ["worker-2"]))
