"""JOBS-01 … JOBS-06's verdicts on records shaped as ``workloads.jobs`` returns them (no Docker).

The numbers are those of a run on 2.60.0 (7 December 2026), shifted to a round epoch.
"""

from __future__ import annotations

from typing import Any

from chaos.testing import Band
from experiments.verdicts.jobs import (
    KILL_TO_FAILED_S,
    RECOVERED_S,
    Killed,
    OrphanedJobReadsRunning,
    StopAnsweredBySupervisorRaceLost,
    Stopped,
    entrypoint_killed,
    job_gone_with_the_cluster,
    node_death_fails_job,
    orphaned_job_failed,
    runs_on_head_by_default,
    start_times_out,
    stop_signals_then_kills,
    stopped_stays_stopped,
    supervisor_killed,
)

T0 = 1_796_624_000.0
NODE = "e539062f11a39d1b133c9b0c7bbdc239692e79483fd348c2b827e2cc"
DIED = (
    "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: JobSupervisor\n"
)
ON_NODE = DIED + f"The actor died because its node has died. Node Id: {NODE}\n"


def log(
    last_tick: float | None, starts: int = 1, sigterm: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "starts": [{"pid": 513, "t": T0}] * starts,
        "child": 514,
        "ticks": 3 if last_tick else 0,
        "last_tick": last_tick,
        "sigterm": sigterm or [],
        "tail": "",
    }


def job(
    *transitions: tuple[float, str], last_tick: float | None = T0 + 0.79, **info: Any
) -> dict[str, Any]:
    return {
        "run": {"submission_id": "raychaos-x", "pid": 513, "child": 514, "node_name": "head",
                "driver_node_id": NODE},
        "transitions": [{"t": T0 + t, "status": s} for t, s in transitions],
        "info": {"status": transitions[-1][1], "driver_exit_code": None, **info},
        "log": log(last_tick),
    }  # fmt: skip


def killed_entrypoint(**changes: Any) -> dict[str, Any]:
    seen = job(
        (0.0, "RUNNING"),
        (0.89, "FAILED"),
        driver_exit_code=-9,
        error_type="JOB_ENTRYPOINT_COMMAND_ERROR",
        message="Job entrypoint command failed with exit code -9, last available logs "
        "(truncated to 20,000 chars):\nraychaos-job tick=1796624000.794\n",
    )
    seen["held"] = {
        "s": 10.0,
        "transitions": [{"t": T0 + 0.9, "status": "FAILED"}],
        "ended": T0 + 10.95,
        "log": log(T0 + 0.79),
    }
    seen["resubmitted"] = {
        "accepted": False,
        "error": "RuntimeError: …Job with submission_id raychaos-x already exists.",
    }
    seen.update(changes)
    return seen


def test_a_killed_entrypoint_fails_at_once_and_is_never_run_again() -> None:
    held = entrypoint_killed(Killed(killed_entrypoint(), T0 + 0.78, []), KILL_TO_FAILED_S)
    assert held.held and held.claim == "JOBS-02", held.reason
    measured = {m.name: m for m in held.measured}
    assert measured["JOBS-02 kill → FAILED (s)"].value == 0.11
    assert measured["JOBS-02 kill → FAILED (s)"].band == (0.0, KILL_TO_FAILED_S)
    assert measured["JOBS-02 error_type"].value == "JOB_ENTRYPOINT_COMMAND_ERROR"


def test_a_rerun_a_late_failure_or_an_accepted_id_fail_jobs_02() -> None:
    rerun = killed_entrypoint()
    rerun["held"] = {**rerun["held"], "log": log(T0 + 9.0, starts=2)}
    # The kill landed on a ticking entrypoint only if its ticks stopped there.
    failed = entrypoint_killed(Killed(rerun, T0 + 0.78, []), KILL_TO_FAILED_S)
    assert failed.outcome == "failed" and "its last tick came -8.22 s" in failed.reason
    rerun["held"]["log"]["last_tick"] = T0 + 0.79
    failed = entrypoint_killed(Killed(rerun, T0 + 0.78, []), KILL_TO_FAILED_S)
    assert failed.outcome == "failed" and "log shows 2 starts" in failed.reason
    late = killed_entrypoint(
        transitions=[{"t": T0, "status": "RUNNING"}, {"t": T0 + 3.0, "status": "FAILED"}]
    )
    failed = entrypoint_killed(Killed(late, T0 + 0.78, []), KILL_TO_FAILED_S)
    assert failed.outcome == "failed" and "FAILED 2.22 s after the kill" in failed.reason
    short = killed_entrypoint()
    short["held"] = {**short["held"], "ended": T0 + 2.0}
    assert (
        "the hold was watched 1.1 s"
        in entrypoint_killed(Killed(short, T0 + 0.78, []), KILL_TO_FAILED_S).reason
    )
    accepted = killed_entrypoint(resubmitted={"accepted": True})
    assert (
        "must be refused"
        in entrypoint_killed(Killed(accepted, T0 + 0.78, []), KILL_TO_FAILED_S).reason
    )
    running = killed_entrypoint(transitions=[{"t": T0, "status": "RUNNING"}])
    assert (
        "never read FAILED"
        in entrypoint_killed(Killed(running, T0 + 0.78, []), KILL_TO_FAILED_S).reason
    )


def killed_supervisor(**changes: Any) -> dict[str, Any]:
    seen = job((0.0, "RUNNING"), (0.85, "FAILED"), last_tick=T0 + 0.63, message=DIED,
               error_type="JOB_SUPERVISOR_ACTOR_DIED")  # fmt: skip
    seen.update({"waited_s": 15.0, **changes})
    return seen


def test_a_killed_supervisor_fails_the_job_and_takes_its_entrypoint() -> None:
    held = supervisor_killed(Killed(killed_supervisor(), T0, []))
    assert held.held and held.claim == "JOBS-03", held.reason
    assert {m.name: m.value for m in held.measured}[
        "JOBS-03 kill → the entrypoint's last tick (s)"
    ] == 0.63


def test_a_surviving_entrypoint_or_another_message_fail_jobs_03() -> None:
    left = supervisor_killed(Killed(killed_supervisor(), T0, [513]))
    assert left.outcome == "failed" and "still ran 15.0 s after" in left.reason
    ticking = killed_supervisor()
    ticking["log"] = log(T0 + 6.0)
    assert "ticked 6.0 s after" in supervisor_killed(Killed(ticking, T0, [])).reason
    other = killed_supervisor()
    other["info"]["message"] = "Unexpected error occurred: failed to get job supervisor."
    assert "must say the supervisor died" in supervisor_killed(Killed(other, T0, [])).reason
    unread = killed_supervisor(log=None, log_error="RuntimeError: 500")
    assert supervisor_killed(Killed(unread, T0, [])).outcome == "unknown"


def stop(name: str, took: float, last_tick: float, **changes: Any) -> dict[str, Any]:
    seen = job(
        (0.0, "RUNNING"),
        (took, "STOPPED"),
        last_tick=last_tick,
        message="Job was intentionally stopped.",
    )
    seen["log"]["sigterm"] = [{"t": T0 + 0.05, "action": name}]
    again = {"t": T0 + took + 0.05, "returned": False, "status_after": "STOPPED"}
    seen.update({"asked": T0, "stop_returned": True, "stop_again": again, **changes})
    return seen


def test_stop_job_signals_then_kills_after_the_wait() -> None:
    exits = Stopped(stop("exit", 0.98, T0), [])
    ignores = Stopped(stop("ignore", 5.08, T0 + 4.85), [])
    held = stop_signals_then_kills(exits, ignores, 5)
    assert held.held and held.claim == "JOBS-04", held.reason
    assert {m.name: m.band for m in held.measured}[
        "JOBS-04 stop_job → STOPPED, SIGTERM ignore (s)"
    ] == (5, 6.2)


def test_an_early_kill_a_late_stop_or_a_survivor_fail_jobs_04() -> None:
    exits = Stopped(stop("exit", 0.98, T0), [])
    early = Stopped(stop("ignore", 3.0, T0 + 2.9), [])
    assert "expected within [5, 6.2] s" in stop_signals_then_kills(exits, early, 5).reason
    ignores = Stopped(stop("ignore", 5.08, T0 + 4.85), [])
    slow = Stopped(stop("exit", 5.5, T0 + 5.4), [])
    assert (
        "STOPPED 5.5 s after stop_job, SIGTERM exit"
        in stop_signals_then_kills(slow, ignores, 5).reason
    )
    child_left = Stopped(stop("exit", 0.98, T0), [514])
    assert (
        "still running after STOPPED: PIDs [514]"
        in stop_signals_then_kills(child_left, ignores, 5).reason
    )
    unsignalled = Stopped({**stop("ignore", 5.08, T0 + 4.85)}, [])
    unsignalled.seen["log"]["sigterm"] = []
    assert "the one SIGTERM it got" in stop_signals_then_kills(exits, unsignalled, 5).reason
    cut = Stopped(stop("ignore", 5.08, T0 + 2.0), [])
    assert "before the 5 s stop wait ran out" in stop_signals_then_kills(exits, cut, 5).reason


TIMEOUT_MESSAGE = (
    "Job supervisor actor failed to start within 10.0 seconds. This timeout can be configured "
    "by setting the environment variable RAY_JOB_START_TIMEOUT_SECONDS. This may be because …"
)


def pending(took: float, message: str = TIMEOUT_MESSAGE) -> dict[str, Any]:
    seen = job((0.05, "PENDING"), (took, "FAILED"), message=message, start_time=T0 * 1000,
               error_type="JOB_SUPERVISOR_ACTOR_START_TIMEOUT")  # fmt: skip
    seen["pending"] = {"status": "PENDING", "message": "Job has not started yet. It may be "
                       "waiting for resources (CPUs, GPUs, memory, custom resources) to become available."}  # fmt: skip
    return seen


def test_a_job_that_cannot_be_placed_fails_at_the_start_timeout() -> None:
    held = start_times_out(pending(10.06), 10)
    assert held.held and held.claim == "JOBS-06", held.reason
    assert "FAILED 9.0 s" in start_times_out(pending(9.0), 10).reason
    assert "FAILED 13.0 s" in start_times_out(pending(13.0), 10).reason
    assert "name the timeout" in start_times_out(pending(10.06, "Job failed."), 10).reason


BAND = Band(2.0, 18.0, "period 1 s, timeout 3 s, threshold 3")


def test_a_dead_entrypoint_node_fails_the_job_once_the_node_is_dead() -> None:
    seen = job(
        (0.0, "RUNNING"), (12.58, "FAILED"), message=ON_NODE, error_type="JOB_SUPERVISOR_ACTOR_DIED"
    )
    seen["log_error"] = "RuntimeError: Request failed with status code 500"
    held = node_death_fails_job(Killed(seen, T0, []), BAND)
    assert held.held and held.claim == "JOBS-05", held.reason
    assert {m.name: m.value for m in held.measured}[
        "JOBS-05 the job's logs after the node died"
    ].startswith("RuntimeError")
    late = job((0.0, "RUNNING"), (26.0, "FAILED"), message=ON_NODE)
    assert "expected within [0, 23.1] s" in node_death_fails_job(Killed(late, T0, []), BAND).reason
    other = job((0.0, "RUNNING"), (12.58, "FAILED"), message=DIED)
    assert "with its node" in node_death_fails_job(Killed(other, T0, []), BAND).reason
    running = job((0.0, "RUNNING"))
    assert "never read FAILED" in node_death_fails_job(Killed(running, T0, []), BAND).reason


def test_the_entrypoint_runs_on_the_head_unless_it_asks_for_resources() -> None:
    held = runs_on_head_by_default({"node_name": "head"}, {"node_name": "worker-1"}, "head")
    assert held.held and held.claim == "JOBS-01", held.reason
    assert (
        runs_on_head_by_default(
            {"node_name": "worker-1"}, {"node_name": "worker-1"}, "head"
        ).outcome
        == "failed"
    )
    assert (
        runs_on_head_by_default({"node_name": "head"}, {"node_name": "head"}, "head").outcome
        == "failed"
    )


GONE = "Request failed with status code 404: Job raychaos-long-1 does not exist."


def test_a_replacement_head_without_ft_knows_nothing_of_the_old_job() -> None:
    seen = {
        "status_only": [{"t": T0, "status": "error: RuntimeError", "error": GONE}],
        "log_error": f"RuntimeError: {GONE}",
        "listed": False,
    }
    held = job_gone_with_the_cluster(seen)
    assert held.held and held.claim == "JOBS-07", held.reason
    known = {**seen, "status_only": [{"t": T0, "status": "RUNNING"}]}
    assert "must not know the old job" in job_gone_with_the_cluster(known).reason
    listed = {**seen, "listed": True}
    assert "lists the old job" in job_gone_with_the_cluster(listed).reason
    other = {
        **seen,
        "status_only": [{"t": T0, "status": "error: ConnectionError", "error": "refused"}],
    }
    assert job_gone_with_the_cluster(other).outcome == "failed"


# JOBS-08 (2.60.0, 7 December 2026): the head back at T0, the first read 17.7 s later.
ORPHANED = {
    "status_only": [{"t": T0 + 17.7, "status": "RUNNING"}],
    "logs_asked": T0 + 37.8,
    "after_logs": [{"t": T0 + 37.85, "status": "RUNNING"}, {"t": T0 + 38.9, "status": "FAILED"}],
    "listed": True,
    "info": {
        "status": "FAILED",
        "message": "Unexpected error occurred: failed to get job supervisor.",
    },
}


def test_an_orphaned_job_that_reads_running_until_a_logs_call_is_the_finding() -> None:
    found = orphaned_job_failed(ORPHANED, T0, 20.0)
    assert found.outcome == "failed" and found.finding is OrphanedJobReadsRunning, found.reason
    assert "read RUNNING by its status alone for 20 s (17.7 s to 37.7 s after" in found.reason
    assert {m.name: m.value for m in found.measured}["JOBS-08 logs asked → FAILED (s)"] == 1.1


def test_an_orphaned_job_failed_by_the_restarted_head_holds_and_other_ends_fail() -> None:
    recovered = {**ORPHANED, "status_only": [{"t": T0 + 17.7, "status": "RUNNING"},
                                             {"t": T0 + 19.0, "status": "FAILED"}]}  # fmt: skip
    held = orphaned_job_failed(recovered, T0, 20.0)
    assert held.held and held.claim == "JOBS-08", held.reason
    late = {**recovered, "status_only": [{"t": T0 + 17.7, "status": "RUNNING"},
                                         {"t": T0 + 17.8 + RECOVERED_S, "status": "FAILED"}]}  # fmt: skip
    assert orphaned_job_failed(late, T0, 20.0).finding is None
    assert orphaned_job_failed(late, T0, 20.0).outcome == "failed"
    stuck = {**ORPHANED, "after_logs": [{"t": T0 + 37.85, "status": "RUNNING"}]}
    failed = orphaned_job_failed(stuck, T0, 20.0)
    assert failed.outcome == "failed" and failed.finding is None
    assert "still after its logs were asked for" in failed.reason
    lost = {**ORPHANED, "listed": False}
    assert "must still list the job" in orphaned_job_failed(lost, T0, 20.0).reason
    unreadable = {
        **ORPHANED,
        "status_only": [{"t": T0 + 17.7, "status": "error: RuntimeError", "error": "404"}],
    }
    assert "stay readable" in orphaned_job_failed(unreadable, T0, 20.0).reason


def test_stop_job_on_a_stopped_job_is_false_and_true_is_the_race_ray_lost() -> None:
    exits = Stopped(stop("exit", 0.98, T0), [])
    ignores = Stopped(stop("ignore", 5.08, T0 + 4.85), [])
    held = stopped_stays_stopped(exits, ignores)
    assert held.held and held.claim == "JOBS-04", held.reason
    late_exit = {"t": T0 + 5.1, "returned": True, "status_after": "STOPPED"}
    lost = stopped_stays_stopped(
        exits, Stopped(stop("ignore", 5.08, T0 + 4.85, stop_again=late_exit), [])
    )
    assert lost.finding is StopAnsweredBySupervisorRaceLost, lost.reason
    assert "read STOPPED 0.02 s before returned True" in lost.reason
    restarted = {"t": T0 + 1.1, "returned": False, "status_after": "RUNNING"}
    failed = stopped_stays_stopped(
        Stopped(stop("exit", 0.98, T0, stop_again=restarted), []), ignores
    )
    assert failed.outcome == "failed" and failed.finding is None
