"""Task failures (docs: fault_tolerance/tasks): TASK-01 … TASK-05.

Knobs shortened: health checks (FAST_HEALTH_CHECKS) where a node dies, so it is DEAD in
seconds; the retry budgets are Ray's own defaults unless a test sets them.
Workloads: ``workloads.tasks`` (exceptions come back as data, see its docstring).
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.check import (
    AFTER_DEATH_S,
    FAST_HEALTH_CHECKS,
    KILL_NODE,
    applies,
    attempts,
    await_dead,
    dead_in_band,
    expected,
    since,
    strike_on,
)
from chaos.check.expectations import RAYLET_RECONNECT_TIMEOUT_S
from chaos.experiment import Experiment

WORKERS_1 = [{"name": "worker-1", "count": 1, "num_cpus": 1}]  # one node called worker-1
WORKERS_3 = [{"name": "worker", "count": 3, "num_cpus": 1}]
CRASHED = ["FAILED", "WORKER_DIED"]
RAISED = ["FAILED", "TASK_EXECUTION_EXCEPTION"]
#: TASK-05's retry waits for the GCS to mark the node DEAD (a soft affinity falls back only
#: for dead nodes), then starts a worker elsewhere: the slack past the band is knobs.AFTER_DEATH_S.
FAILOVER_SLACK_S = AFTER_DEATH_S
#: How often a Ray gRPC client checks its channel's state
#: (``grpc_client_check_connection_status_interval_milliseconds``, 1000 by default).
CHANNEL_CHECK_S = 1.0


def retry_window(experiment: Experiment) -> tuple[float, float]:
    """When TASK-05's retry can start, in seconds after the kill (expectations:
    ``raylet_unavailable_backoff``).

    The retry's lease request goes to the dead node's raylet while the driver's raylet still
    lists the node. From 2.51.0 the owner re-checks an unreachable raylet against the GCS
    within seconds, so the retry follows the node's death (the health-check band). Before,
    it asks the GCS only after ``RAY_raylet_rpc_server_reconnect_timeout_s`` (default 60 s)
    of unavailability: the retry cannot start earlier, nor much later.
    """
    band = experiment.node_death_band()
    if applies("raylet_unavailable_backoff", experiment.ray_version):
        return 0.0, band.high
    knob = experiment.cluster.knobs().get("RAY_raylet_rpc_server_reconnect_timeout_s")
    wait = float(knob) if knob is not None else float(RAYLET_RECONNECT_TIMEOUT_S)
    return wait, max(band.high, wait + CHANNEL_CHECK_S)


def crash(experiment: Experiment, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    run = experiment.cluster.run(
        "workloads.tasks:worker_crash_retries", on="worker-1", timeout=240, env=env, **kwargs
    )
    return run.result()


def check_crashed(seen: dict[str, Any], executions: int) -> None:
    assert seen["executions"] == executions, f"expected {executions} executions: {seen}"
    err = seen["error"]
    assert err is not None, f"the task must fail once its budget is spent: {seen}"
    assert err["type"] == "WorkerCrashedError", err
    assert err["bases"][:2] == ["RayError", "Exception"], err["bases"]
    assert not err["is_RayTaskError"], "a worker crash is a system error, not a RayTaskError"
    assert attempts(seen["attempts"]) == [CRASHED] * executions, seen["attempts"]


@pytest.mark.claim("TASK-01", "TASK-02")
@pytest.mark.cluster(driver=False, head={"num_cpus": 0}, workers=WORKERS_1)
def test_worker_crashes_spend_the_retry_budget(experiment: Experiment) -> None:
    """A SIGKILLed worker is retried max_retries times (default 3; ``RAY_TASK_MAX_RETRIES``
    in the driver sets the default; an explicit option wins), then ``WorkerCrashedError``."""
    worker = experiment.cluster.node("worker-1").node_id

    seen = crash(experiment, max_retries=2)
    check_crashed(seen, 3)
    experiment.measure("TASK-01 3 crashed attempts (s)", seen["seconds"])

    seen = crash(experiment)
    check_crashed(seen, 4)  # Ray's default budget: 3 retries
    experiment.measure("TASK-01 4 crashed attempts, default budget (s)", seen["seconds"])

    seen = crash(experiment, max_retries=3, crash_attempts=2)
    assert seen["error"] is None, f"the third execution must succeed: {seen}"
    assert seen["value"]["attempt"] == 3 and seen["value"]["node_id"] == worker, seen["value"]
    assert attempts(seen["attempts"]) == [CRASHED, CRASHED, ["FINISHED", None]], seen["attempts"]

    # TASK-02: the driver's environment sets the default budget …
    check_crashed(crash(experiment, env={"RAY_TASK_MAX_RETRIES": "1"}), 2)
    check_crashed(crash(experiment, env={"RAY_TASK_MAX_RETRIES": "0"}), 1)
    # … and an explicit max_retries still wins over it.
    check_crashed(crash(experiment, env={"RAY_TASK_MAX_RETRIES": "1"}, max_retries=2), 3)


def raising(experiment: Experiment, **kwargs: Any) -> Any:
    run = experiment.cluster.run(
        "workloads.tasks:app_exception_retries", on="worker-1", timeout=240, **kwargs
    )
    return run.result()


def check_raised(seen: dict[str, Any], cause: str, executions: int) -> None:
    assert seen["executions"] == executions, f"expected {executions} executions: {seen}"
    err = seen["error"]
    assert err is not None, f"the task must fail: {seen}"
    assert err["type"] == f"RayTaskError({cause})", err["type"]
    assert err["bases"][:3] == ["RayTaskError", "RayError", cause], err["bases"]
    assert err["is_RayTaskError"] and seen["isinstance_cause"], f"must also be a {cause}"
    assert attempts(seen["attempts"]) == [RAISED] * executions, seen["attempts"]


@pytest.mark.claim("TASK-03")
@pytest.mark.cluster(driver=False, head={"num_cpus": 0}, workers=WORKERS_1)
def test_application_exceptions_are_retried_only_when_asked(experiment: Experiment) -> None:
    """Not retried by default; ``retry_exceptions`` (True or a list of types) retries up to
    ``max_retries`` for those types only; the caller's ``RayTaskError`` is-a the cause."""
    check_raised(raising(experiment), "AppError", 1)
    check_raised(raising(experiment, retry_exceptions=True, max_retries=2), "AppError", 3)
    check_raised(raising(experiment, retry_exceptions=True), "AppError", 4)  # default budget
    listed = {"retry_exceptions": ["ValueError"], "max_retries": 2}
    check_raised(raising(experiment, **listed), "AppError", 1)  # not a listed type
    check_raised(raising(experiment, raise_type="ValueError", **listed), "ValueError", 3)

    seen = raising(experiment, retry_exceptions=True, max_retries=2, fail_attempts=1)
    assert seen["error"] is None and seen["value"] == 2, f"the retry must succeed: {seen}"
    assert attempts(seen["attempts"]) == [RAISED, ["FINISHED", None]], seen["attempts"]


@pytest.mark.claim("TASK-04", "TASK-05")
# Keeps its driver node. Of two runs without it (4 December), one saw NodeDiedError 0.11 s after
# the kill and one (CI, a loaded host) 20.7 s, after the node's death (12.9 s); with it, every run
# so far 0.08-0.11 s. Whether the head's placement or the load did it is not established.
@pytest.mark.cluster(env=FAST_HEALTH_CHECKS, head={"num_cpus": 0}, workers=WORKERS_3)
def test_node_death_fails_or_retries_its_task(experiment: Experiment) -> None:
    """TASK-04: without retries ``NodeDiedError`` (naming IP and node id) comes at once, before
    the node is marked DEAD. TASK-05: with a retry left the task completes on another node,
    although ``retry_exceptions=False`` — once the node is DEAD, or before 2.51.0 once the
    owner's raylet reconnect wait ran out (:func:`retry_window`)."""
    cluster = experiment.cluster
    band = experiment.node_death_band()
    # NodeDiedError's text names the node's IP one way or another by release (expectations).
    node_ip = expected("node_died_message", experiment.ray_version)

    victim = cluster.node("worker-1")
    victim_id = str(victim.node_id)
    run = cluster.run(
        "workloads.tasks:task_on_dying_node", on="worker-1", max_retries=0, timeout=300
    )
    kill, running = strike_on(experiment, run, "task_running", KILL_NODE)
    assert running.get("node_id") == victim_id, "the task must run on worker-1"
    seen = run.result(timeout=240)
    err = seen["error"]
    assert err is not None and err["type"] == "NodeDiedError", f"expected NodeDiedError: {seen}"
    assert err["bases"][:2] == ["RayError", "Exception"] and not err["is_RayTaskError"], err
    assert "reason" not in err, err
    assert node_ip.format(ip=victim.ip) in err["message"], err["message"]
    assert victim_id in err["message"], "the error must name the node id"
    assert attempts(seen["attempts"]) == [["FAILED", "NODE_DIED"]], seen["attempts"]
    assert len(seen["executions"]) == 1, seen["executions"]
    outcome = experiment.measure("TASK-04 kill → NodeDiedError (s)", since(kill, seen["t_outcome"]))
    dead = dead_in_band(experiment, kill, seen["t_dead_seen"], "TASK-04 kill")
    assert outcome < dead, f"NodeDiedError ({outcome} s) must come before node death ({dead} s)"
    assert outcome < band.high, f"NodeDiedError after {outcome} s"
    await_dead(experiment, kill, victim_id, "TASK-04 kill")

    victim = cluster.node("worker-2")
    victim_id = str(victim.node_id)
    run = cluster.run(
        "workloads.tasks:task_on_dying_node",
        on="worker-2",
        max_retries=1,
        soft=True,  # a hard pin to a dead node would leave the retry unschedulable
        retry_exceptions=False,
        timeout=300,
    )
    kill, running = strike_on(experiment, run, "task_running", KILL_NODE)
    assert running.get("node_id") == victim_id, "the first execution must run on worker-2"
    seen = run.result(timeout=240)
    assert seen["error"] is None, f"the retry must succeed: {seen['error']}"
    assert seen["value"]["execution"] == 2, seen["value"]
    assert seen["value"]["node_id"] == cluster.node("worker-3").node_id, (
        f"the retry must run on the only live worker, worker-3: {seen['value_node_name']}"
    )
    assert attempts(seen["attempts"]) == [["FAILED", "NODE_DIED"], ["FINISHED", None]], seen[
        "attempts"
    ]
    earliest, latest = retry_window(experiment)
    completed = experiment.measure(
        "TASK-05 kill → retry done (s)",
        since(kill, seen["t_outcome"]),
        band=(earliest, latest + FAILOVER_SLACK_S),
    )
    assert earliest <= completed <= latest + FAILOVER_SLACK_S, (
        f"retry done {completed} s after the kill, window [{earliest}, {latest}] s + slack"
    )
    dead_in_band(experiment, kill, seen["t_dead_seen"], "TASK-05 kill")
    await_dead(experiment, kill, victim_id, "TASK-05 kill")
