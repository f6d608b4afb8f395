"""JOBS-01 … JOBS-06 as pure verdicts over what ``workloads.jobs`` recorded: the job's status
transitions as a client polled them every 0.1 s, its final ``JobInfo``, what its entrypoint
logged (``workloads.job_entry``: its PID, a tick every 0.25 s, the SIGTERM it got) and the
host's strike times.

The constants are Ray's (``ray/dashboard/modules/job/``, read in the 2.59.0 and 2.60.0 wheels):
the job supervisor polls its entrypoint every ``SUBPROCESS_POLL_PERIOD_S`` (0.1 s); the job
manager pings the supervisor once per ``JOB_MONITOR_LOOP_PERIOD_S`` (1 s); a supervisor
that dies takes its entrypoint down through a shell watchdog polling once a second
(``while kill -s 0 <supervisor>; do sleep 1; done; kill -9 -<pgid>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Band, Finding, Judging, RaceLost, verdict

#: The supervisor's poll of its entrypoint (``JobSupervisor.SUBPROCESS_POLL_PERIOD_S`` in
#: job_supervisor.py: 0.1 s).
SUBPROCESS_POLL_S = 0.1
#: The job manager's monitor loop (``JobManager.JOB_MONITOR_LOOP_PERIOD_S`` in
#: job_manager.py: 1 s).
MONITOR_LOOP_S = 1.0
#: The supervisor's watchdog on its entrypoint (``sleep 1`` in job_supervisor.py's
#: ``_exec_entrypoint``).
WATCHDOG_S = 1.0
#: The entrypoint's tick (``workloads.job_entry.TICK_S``, 0.25 s) and the client's poll
#: (``workloads.jobs.POLL_S``, 0.1 s): the resolution of the windows below.
TICK_S = 0.25
POLL_S = 0.1
#: What Ray's path adds to a window past its periods: a status written to the GCS's KV, read
#: back by the dashboard for the client; a death reported by the raylet through the GCS.
#: 1 s covers it on an idle host with a wide margin; a stalled one is judged by the host's
#: stall check, not by this number.
WRITE_S = 1.0
#: JOBS-02: kill → FAILED: one supervisor poll, the log tail read, the status written, one
#: client poll.
KILL_TO_FAILED_S = round(SUBPROCESS_POLL_S + WRITE_S + POLL_S, 2)
#: How long an actor task to a dead actor may wait for the GCS's word of its death before it
#: fails (``RAY_timeout_ms_task_wait_for_death_info``, 1000 ms by default; in 2.60.0's
#: ``_raylet.so``).
DEATH_INFO_WAIT_S = 1.0
#: When the job manager learns its supervisor died: its monitor sends a ping, reads it at the
#: next loop, sends the next one a loop later (job_manager.py's ``_monitor_job_internal``), so the first ping
#: to the dead supervisor leaves up to two loops after the death, fails within the death-info
#: wait, and is read at the loop after.
PING_READ_S = 3 * MONITOR_LOOP_S + DEATH_INFO_WAIT_S
#: JOBS-03: kill → FAILED: the ping read, the status written, one client poll (measured
#: 0.66–2.03 s on 2.60.0 on an idle host).
SUPERVISOR_TO_FAILED_S = round(PING_READ_S + WRITE_S + POLL_S, 2)
#: JOBS-03: kill → the entrypoint's last tick: the watchdog's period and a tick.
WATCHDOG_TO_GONE_S = round(WATCHDOG_S + TICK_S + WRITE_S, 2)

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Killed:
    """A job whose entrypoint, supervisor or node the host killed: what the workload saw
    (``run``, ``transitions``, ``info``, ``log`` or ``log_error``), when the strike landed,
    and which of the job's processes still ran afterwards (read once by the host)."""

    seen: Row
    struck_at: float
    still_running: Sequence[int]


@dataclass(frozen=True)
class Stopped:
    """A job ``stop_job`` ended (``workloads.jobs:stopped``) and which of its processes (the
    entrypoint, its ``sleep`` child) still ran afterwards."""

    seen: Row
    still_running: Sequence[int]


def first_status(j: Judging, seen: Row, status: str) -> float:
    """When the client first read ``status``; the claim failed if it never did."""
    at = next((float(t["t"]) for t in seen["transitions"] if t["status"] == status), None)
    final = seen["info"].get("status")
    return j.found(at, f"the job never read {status}: ended {final}, {list(seen['transitions'])}")


def status_within(
    j: Judging,
    seen: Row,
    status: str,
    name: str,
    start: float,
    band: tuple[float, float],
    after: str,
) -> float:
    """The window from ``start`` to the client's first read of ``status``, measured as
    ``name`` and held against ``band``; the claim failed outside it. Returns the window."""
    at = first_status(j, seen, status)
    took: float = j.measure(name, round(at - start, 2), band=band, start=start)
    low, high = band
    j.require(
        low <= at - start <= high,
        f"{status} {took} s after {after}; expected within [{low:g}, {high:g}] s",
    )
    return took


def error_type(j: Judging, info: Row, expected: str) -> None:
    """``error_type`` is ``expected`` where the release records one (``JobInfo.error_type``)."""
    if "error_type" in info:
        got = str(info["error_type"]).rsplit(".", 1)[-1]
        j.measure(f"{j.claim} error_type", got)
        j.require(got == expected, f"error_type {got}, expected {expected}")


@verdict("JOBS-02")
def entrypoint_killed(j: Judging, killed: Killed, bound_s: float) -> str:
    """The entrypoint SIGKILLed: FAILED within ``bound_s`` of the kill, exit code -9, the
    message naming it with the log's last lines; never re-run (one start in the log, FAILED
    all through the hold); the same submission id refused."""
    seen, info = killed.seen, killed.seen["info"]
    last = j.found(seen["held"]["log"]["last_tick"], "the entrypoint never ticked")
    stopped = j.measure("JOBS-02 last tick → kill (s)", round(killed.struck_at - last, 2))
    j.require(
        -TICK_S <= stopped <= TICK_S + WRITE_S,
        f"the kill must land on a ticking entrypoint and end it: its last tick came "
        f"{stopped} s before the kill (it ticks every {TICK_S} s)",
    )
    took = status_within(
        j, seen, "FAILED", "JOBS-02 kill → FAILED (s)", killed.struck_at, (0.0, bound_s), "the kill"
    )
    j.require(
        info.get("driver_exit_code") == -9,
        f"driver_exit_code {info.get('driver_exit_code')}, expected -9 (SIGKILL)",
    )
    message = str(info.get("message"))
    j.require(
        message.startswith("Job entrypoint command failed with exit code -9"),
        f"the message must name the exit code: {message[:300]!r}",
    )
    j.require(
        "raychaos-job tick=" in message,
        f"the message must carry the last log lines: {message[-300:]!r}",
    )
    error_type(j, info, "JOB_ENTRYPOINT_COMMAND_ERROR")
    held = seen["held"]
    statuses = {t["status"] for t in held["transitions"]}
    j.measure("JOBS-02 statuses over the hold", sorted(statuses))
    watched = j.measure(
        "JOBS-02 hold watched (s)",
        round(float(held["ended"]) - float(held["transitions"][0]["t"]), 2),
    )
    j.require(watched >= held["s"] - POLL_S, f"the hold was watched {watched} s, not {held['s']} s")
    j.require(
        statuses == {"FAILED"}, f"over {held['s']} s after, the job read {held['transitions']}"
    )
    starts = held["log"]["starts"]
    j.require(len(starts) == 1, f"the entrypoint must run once, its log shows {len(starts)} starts")
    again = seen["resubmitted"]
    j.require(
        not again["accepted"] and "already exists" in str(again.get("error")),
        f"the same submission id again must be refused as existing: {again}",
    )
    return f"FAILED {took} s after the kill (exit code -9), not re-run over {held['s']} s, the id refused again"


@verdict("JOBS-03")
def supervisor_killed(j: Judging, killed: Killed) -> str:
    """The job's supervisor actor SIGKILLed: FAILED "Job supervisor actor died" once the
    monitor's ping has read the death (:data:`PING_READ_S`), no exit code; the entrypoint dies with it (its ticks stop
    within the watchdog's period) and no process of it is left."""
    seen, info = killed.seen, killed.seen["info"]
    # The bound: a ping every other JOB_MONITOR_LOOP_PERIOD_S, then the death-info wait.
    took = status_within(
        j, seen, "FAILED", "JOBS-03 kill → FAILED (s)", killed.struck_at,
        (0.0, SUPERVISOR_TO_FAILED_S), "the kill",
    )  # fmt: skip
    message = str(info.get("message"))
    j.require(
        message.startswith("Job supervisor actor died"),
        f"the message must say the supervisor died: {message[:300]!r}",
    )
    j.require(
        info.get("driver_exit_code") is None,
        f"no exit code is known for an entrypoint killed with its supervisor: {info.get('driver_exit_code')}",
    )
    error_type(j, info, "JOB_SUPERVISOR_ACTOR_DIED")
    log = seen.get("log") or j.unknown(f"the job's log could not be read: {seen.get('log_error')}")
    last = j.found(log["last_tick"], "the entrypoint never ticked")
    gone = j.measure(
        "JOBS-03 kill → the entrypoint's last tick (s)",
        round(last - killed.struck_at, 2),
        band=(-TICK_S, WATCHDOG_TO_GONE_S),
        start=killed.struck_at,
    )
    j.require(
        -TICK_S <= gone <= WATCHDOG_TO_GONE_S,
        f"the entrypoint ticked {gone} s after its supervisor's kill; the watchdog's period is {WATCHDOG_S} s",
    )
    j.require(
        not killed.still_running,
        f"the entrypoint still ran {seen.get('waited_s')} s after its supervisor's kill: "
        f"PIDs {list(killed.still_running)}",
    )
    return f"FAILED {took} s after the kill ({message[:60]}…); the entrypoint's last tick {gone} s after"


@verdict("JOBS-04")
def stop_signals_then_kills(j: Judging, exits: Stopped, ignores: Stopped, wait_s: float) -> str:
    """``stop_job`` returns True on a running job (on a stopped one: :func:`stopped_stays_stopped`);
    SIGTERM reaches the entrypoint; one that exits on it is STOPPED before the stop wait runs out; one that
    ignores it runs on through the wait and is STOPPED, SIGKILLed, at ``wait_s`` after the
    request (within a supervisor poll and a write); no process of either tree is left; the
    status STOPPED with no exit code."""
    took: dict[str, float] = {}
    for name, stopped in (("exit", exits), ("ignore", ignores)):
        seen, info = stopped.seen, stopped.seen["info"]
        j.require(
            seen["stop_returned"] is True,
            f"{name}: stop_job on a running job returned {seen['stop_returned']}",
        )
        asked = float(seen["asked"])
        high = wait_s if name == "exit" else round(wait_s + SUBPROCESS_POLL_S + WRITE_S + POLL_S, 2)
        low = 0.0 if name == "exit" else wait_s
        took[name] = status_within(
            j, seen, "STOPPED", f"JOBS-04 stop_job → STOPPED, SIGTERM {name} (s)", asked,
            (low, high), f"stop_job, SIGTERM {name} (RAY_JOB_STOP_WAIT_TIME_S {wait_s})",
        )  # fmt: skip
        j.require(
            info.get("driver_exit_code") is None,
            f"{name}: exit code {info.get('driver_exit_code')}",
        )
        log = seen.get("log") or j.unknown(
            f"{name}: the job's log could not be read: {seen.get('log_error')}"
        )
        terms = log["sigterm"]
        j.require(
            len(terms) == 1 and terms[0]["action"] == name,
            f"{name}: the entrypoint must log the one SIGTERM it got: {terms}",
        )
        j.require(
            not stopped.still_running,
            f"{name}: still running after STOPPED: PIDs {list(stopped.still_running)}",
        )
        if name == "ignore":
            last = j.found(log["last_tick"], "the entrypoint never ticked")
            alive = j.measure(
                "JOBS-04 SIGTERM → last tick, ignored (s)", round(last - terms[0]["t"], 2)
            )
            j.require(
                alive >= wait_s - TICK_S - SUBPROCESS_POLL_S,
                f"the entrypoint that ignored SIGTERM stopped ticking {alive} s after it, "
                f"before the {wait_s} s stop wait ran out",
            )
    return (
        f"exits on SIGTERM: STOPPED {took['exit']} s after stop_job; ignores it: "
        f"SIGKILLed and STOPPED {took['ignore']} s after (wait {wait_s} s); no process left"
    )


class StopAnsweredBySupervisorRaceLost(RaceLost):
    """JOBS-04's race: ``stop_job`` on a job already STOPPED returned True. Ray answers it by
    whether the job's supervisor actor can still be looked up (``JobManager.stop_job``), not
    by the job's status, and the supervisor writes STOPPED before it exits
    (``JobSupervisor.run``: ``put_status``, then ``exit_actor``): a call between the two is
    told the job was running."""

    claims: ClassVar[tuple[str, ...]] = ("JOBS-04",)


@verdict("JOBS-04")
def stopped_stays_stopped(j: Judging, exits: Stopped, ignores: Stopped) -> str:
    """``stop_job`` on a job the client already read STOPPED returns False ("True if the job
    was running, otherwise False") and changes nothing; True is the race Ray lost
    (:class:`StopAnsweredBySupervisorRaceLost`), judged after every other verdict of the run."""
    for name, stopped in (("exit", exits), ("ignore", ignores)):
        again = stopped.seen["stop_again"]
        read = first_status(j, stopped.seen, "STOPPED")
        j.measure(
            f"JOBS-04 STOPPED read → stop_job again, SIGTERM {name} (s)",
            round(float(again["t"]) - read, 2),
        )
        j.require(
            again["status_after"] == "STOPPED",
            f"{name}: after a second stop_job the job read {again}",
        )
        if again["returned"] is not False:
            j.fail(
                f"{name}: stop_job on a job read STOPPED {float(again['t']) - read:.2f} s before "
                f"returned {again['returned']}: its supervisor had not exited yet",
                StopAnsweredBySupervisorRaceLost,
            )
    return "stop_job on a stopped job returned False, both ends"


@verdict("JOBS-06")
def start_times_out(j: Judging, seen: Row, timeout_s: float) -> str:
    """A job whose entrypoint resources no node has: PENDING with the message that it may be
    waiting for resources, then FAILED once ``RAY_JOB_START_TIMEOUT_SECONDS`` passed since
    its submission (within one monitor loop), the message naming the timeout and its knob."""
    pending, info = seen["pending"], seen["info"]
    j.require(
        pending.get("status") == "PENDING",
        f"the job must wait PENDING first: {pending.get('status')}",
    )
    j.require(
        "waiting for resources" in str(pending.get("message")),
        f"the PENDING message must say it may wait for resources: {pending.get('message')!r}",
    )
    submitted = float(info["start_time"]) / 1000
    # RAY_JOB_START_TIMEOUT_SECONDS, checked once per monitor loop.
    high = round(timeout_s + MONITOR_LOOP_S + WRITE_S + POLL_S, 2)
    took = status_within(
        j, seen, "FAILED", "JOBS-06 submission → FAILED (s)", submitted, (timeout_s, high),
        "submission",
    )  # fmt: skip
    message = str(info.get("message"))
    j.require(
        message.startswith(
            f"Job supervisor actor failed to start within {float(timeout_s)} seconds"
        )
        and "RAY_JOB_START_TIMEOUT_SECONDS" in message,
        f"the message must name the timeout and its knob: {message[:300]!r}",
    )
    error_type(j, info, "JOB_SUPERVISOR_ACTOR_START_TIMEOUT")
    return f"PENDING, then FAILED {took} s after submission (timeout {timeout_s} s)"


@verdict("JOBS-05")
def node_death_fails_job(j: Judging, killed: Killed, band: Band) -> str:
    """The node running the entrypoint (placed off the head by its entrypoint resources) is
    killed: the job is FAILED "Job supervisor actor died" once the node is declared dead
    (the node-death band) and the monitor's ping has read it; never left RUNNING."""
    seen, info = killed.seen, killed.seen["info"]
    # The node-death band, then the job manager's ping reading it (as JOBS-03).
    high = round(band.high + PING_READ_S + WRITE_S + POLL_S, 2)
    took = status_within(
        j, seen, "FAILED", "JOBS-05 node kill → FAILED (s)", killed.struck_at, (0.0, high),
        f"the node's kill (node death {band})",
    )  # fmt: skip
    message = str(info.get("message"))
    node_id = str(seen["run"].get("driver_node_id"))
    j.require(
        message.startswith("Job supervisor actor died") and node_id in message,
        f"the message must say the supervisor died with its node {node_id}: {message[:400]!r}",
    )
    error_type(j, info, "JOB_SUPERVISOR_ACTOR_DIED")
    j.measure("JOBS-05 the job's logs after the node died", seen.get("log_error") or "readable")
    return f"FAILED {took} s after the node's kill ({message[:80]}…)"


@verdict("JOBS-01")
def runs_on_head_by_default(j: Judging, default: Row, with_cpus: Row, head: str) -> str:
    """A job submitted without entrypoint resources runs its entrypoint on the head; one
    with ``entrypoint_num_cpus`` runs it on a node that has them (the head has none)."""
    j.measure("JOBS-01 default entrypoint's node", default.get("node_name"))
    j.measure("JOBS-01 entrypoint_num_cpus=1's node", with_cpus.get("node_name"))
    j.require(
        default.get("node_name") == head,
        f"the default entrypoint ran on {default.get('node_name')}, not {head}",
    )
    j.require(
        with_cpus.get("node_name") not in (None, head),
        f"the entrypoint asking for a CPU ran on {with_cpus.get('node_name')}; the head has none",
    )
    return f"default: on {head}; entrypoint_num_cpus=1: on {with_cpus.get('node_name')}"


# -- JOBS-07, JOBS-08: the head restarted under a running job ---------------------------------


def status_error(row: Row) -> str:
    """The SDK's refusal a status read recorded (empty for a status)."""
    return str(row.get("error", "")) if str(row["status"]).startswith("error") else ""


@verdict("JOBS-07")
def job_gone_with_the_cluster(j: Judging, seen: Row) -> str:
    """Without GCS fault tolerance the head's death ends the job with its cluster, and the
    head started again knows nothing of it: its status is refused as not existing (the
    dashboard's 404 "does not exist", the SDK's ``RuntimeError``), its logs too, and the job
    list does not hold it."""
    first = seen["status_only"][0]
    j.measure(
        "JOBS-07 the new head's answer for the old job", status_error(first) or first["status"]
    )
    j.require(
        "does not exist" in status_error(first),
        f"the replacement head must not know the old job: it read {first}",
    )
    j.require(
        "does not exist" in str(seen.get("log_error", "")),
        f"its logs must be refused as not existing: {seen.get('log_error') or seen.get('log')}",
    )
    j.require(not seen["listed"], "the replacement head lists the old job")
    return "the replacement head refuses the old job as not existing and does not list it"


class OrphanedJobReadsRunning(Finding):
    """FINDING JOBS-08: after a head restart under GCS fault tolerance, a job whose supervisor
    and entrypoint died with the old head reads RUNNING for as long as no job call reaches the
    restarted head's job agent: the agent makes its job manager, whose start-up recovers the
    unfinished jobs, only on the first submit, stop, delete or logs call
    (``JobAgent.get_job_manager``), and a status read is served by the dashboard from the
    GCS's store without it. Raised only once the status read RUNNING throughout the watch and
    a logs call then turned it FAILED."""

    claims: ClassVar[tuple[str, ...]] = ("JOBS-08",)


#: JOBS-08: from the first status read after the restart to FAILED, had the restarted head's
#: job manager recovered the job at start-up: its monitor's first loop finds no supervisor
#: (at most a ping's read, as JOBS-03), the status written, one client poll.
RECOVERED_S = round(PING_READ_S + WRITE_S + POLL_S, 2)


@verdict("JOBS-08")
def orphaned_job_failed(j: Judging, seen: Row, back_at: float, status_s: float) -> str:
    """The head restarted under GCS FT (back at ``back_at``) while a job ran on it: the job is
    still listed (its record survived in the GCS's store) and, read by its status alone, it is
    FAILED within :data:`RECOVERED_S` of the first read (the restarted job manager's recovery:
    its supervisor is gone). A status that reads RUNNING all through ``status_s`` of reads
    and turns FAILED only once its logs were asked for is the finding."""
    j.require(
        bool(seen["listed"]),
        "the restarted head must still list the job (its record is in the GCS's store)",
    )
    first = seen["status_only"]
    j.require(
        bool(first) and not any(status_error(r) for r in first),
        f"the job's status must stay readable after the restart: {first}",
    )
    opened = float(first[0]["t"])
    j.measure("JOBS-08 head back → first status read (s)", round(opened - back_at, 2))
    failed_at = next((float(r["t"]) for r in first if r["status"] == "FAILED"), None)
    if failed_at is not None:
        took = j.measure(
            "JOBS-08 first status read → FAILED (s)",
            round(failed_at - opened, 2),
            band=(0.0, RECOVERED_S),
            start=opened,
        )
        j.require(
            took <= RECOVERED_S,
            f"FAILED {took} s after the first read; expected within {RECOVERED_S} s",
        )
        return f"FAILED {took} s after the first read: {seen['info'].get('message')}"
    statuses = sorted({str(r["status"]) for r in first})
    j.measure("JOBS-08 statuses read alone after the restart", statuses)
    j.require(statuses == ["RUNNING"], f"read alone, the orphaned job's status was {first}")
    after = [r for r in seen.get("after_logs", []) if r["status"] == "FAILED"]
    if not after:
        j.fail(
            f"the orphaned job read RUNNING for {status_s:g} s and still after its logs were "
            f"asked for: {seen.get('after_logs')}"
        )
    flipped = j.measure(
        "JOBS-08 logs asked → FAILED (s)",
        round(float(after[0]["t"]) - float(seen["logs_asked"]), 2),
    )
    j.fail(
        f"the job that ran on the restarted head read RUNNING by its status alone for "
        f"{status_s:g} s ({opened - back_at:.1f} s to {opened - back_at + status_s:.1f} s after the head "
        f"was back), and turned FAILED {flipped} s after a logs call reached the head's job "
        f"agent: {seen['info'].get('message')!r}",
        OrphanedJobReadsRunning,
    )
