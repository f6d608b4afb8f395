"""Ray Jobs as a team's CI submits them (claims JOBS-01 … JOBS-06): the job submission SDK
over HTTP to the head's dashboard, from the driver node, no Ray connection.

Each job's entrypoint is ``workloads.job_entry`` (a real Ray driver that logs its PID, a
child's and a tick every 0.25 s). Every function polls the job's status every
:data:`POLL_S` and returns what it saw as data: the transitions with their wall-clock times,
the final ``JobInfo``, what the job's log said. Where the host must strike, the function emits
an event naming the victim (``node_name``, ``pid``) and carries on watching. A function raises
only when its set-up failed (a job that never started).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from ray.job_submission import JobStatus, JobSubmissionClient
from raychaos_agent import emit, nodes, until

from workloads.job_entry import MARK

#: How often the status is read (0.1 s): the resolution of every window the family measures.
POLL_S = 0.1
#: A custom resource no node has (JOBS-06): the job's supervisor cannot be placed.
ABSENT_RESOURCE = "raychaos_absent"
ENTRY = "exec python -u -m workloads.job_entry"
TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}


def client(dashboard: str) -> JobSubmissionClient:
    return JobSubmissionClient(dashboard)


def answering(dashboard: str) -> JobSubmissionClient | None:
    """A client once the dashboard answers a job call (the SDK asks for its version when it
    is made), else None."""
    try:
        jobs = client(dashboard)
        jobs.list_jobs()
    except (RuntimeError, OSError):
        return None
    return jobs


def new_id(tag: str) -> str:
    return f"raychaos-{tag}-{uuid.uuid4().hex[:8]}"


def info_of(jobs: JobSubmissionClient, sid: str) -> dict[str, Any]:
    """The job's ``JobInfo`` as data (every field this release has)."""
    info = jobs.get_job_info(sid)  # a pydantic JobDetails
    row = info.model_dump() if hasattr(info, "model_dump") else info.dict()
    return {k: (v.value if isinstance(v, JobStatus) else v) for k, v in row.items()}


def node_of(address: str | None) -> str | None:
    """The raychaos node name behind a ``driver_agent_http_address`` (``http://ip:port``)."""
    if not address:
        return None
    ip = address.split("//", 1)[-1].rsplit(":", 1)[0]
    return next((name for name, n in nodes().items() if n.get("ip") == ip), None)


def log_facts(text: str) -> dict[str, Any]:
    """What the entrypoint wrote to its log (``workloads.job_entry``'s lines)."""
    starts = re.findall(rf"{MARK} pid=(\d+) started=([\d.]+)", text)
    ticks = [float(t) for t in re.findall(rf"{MARK} tick=([\d.]+)", text)]
    child = re.findall(rf"{MARK} child=(\d+)", text)
    term = re.findall(rf"{MARK} sigterm=([\d.]+) (\w+)", text)
    return {
        "starts": [{"pid": int(p), "t": float(t)} for p, t in starts],
        "child": int(child[-1]) if child else None,
        "ticks": len(ticks),
        "last_tick": ticks[-1] if ticks else None,
        "sigterm": [{"t": float(t), "action": a} for t, a in term],
        "tail": text[-600:],
    }


def watch(
    jobs: JobSubmissionClient, sid: str, timeout: float, stop: set[JobStatus] | None = None
) -> list[dict[str, Any]]:
    """Poll the status every :data:`POLL_S` until it is in ``stop`` (default: terminal) or
    ``timeout`` s pass; the transitions ``{t, status}`` (read errors recorded, not raised:
    the dashboard may not answer mid-fault)."""
    stop = TERMINAL if stop is None else stop
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        error = None
        try:
            status: Any = jobs.get_job_status(sid)
        except (RuntimeError, OSError) as exc:  # the SDK's refusal, or no connection: judged
            status, error = f"error: {type(exc).__name__}", str(exc)[-300:]
        now = time.time()
        if not seen or seen[-1]["status"] != str(getattr(status, "value", status)):
            seen.append({"t": now, "status": str(getattr(status, "value", status))})
            if error:
                seen[-1]["error"] = error
        if status in stop:
            break
        time.sleep(POLL_S)  # the polling period of a bounded watch
    return seen


def started(jobs: JobSubmissionClient, sid: str, timeout: float = 120.0) -> dict[str, Any]:
    """Wait until the job RUNS and its entrypoint has logged its PID (and child's, if any);
    its info and log facts. Raises on a job that never started (set-up)."""
    seen = watch(jobs, sid, timeout, stop={JobStatus.RUNNING, *TERMINAL})
    if seen[-1]["status"] != JobStatus.RUNNING.value:
        raise RuntimeError(f"set-up: job {sid} did not start: {seen} {info_of(jobs, sid)}")
    facts = until(
        lambda: log_facts(jobs.get_job_logs(sid)), lambda f: bool(f["ticks"]), timeout=120
    )
    if not facts["ticks"]:
        raise RuntimeError(f"set-up: job {sid}'s entrypoint never ticked: {facts['tail']}")
    info = info_of(jobs, sid)
    return {
        "submission_id": sid,
        "t_running": seen[-1]["t"],
        "pid": facts["starts"][0]["pid"],
        "child": facts["child"],
        "node_name": node_of(info.get("driver_agent_http_address")),
        "driver_node_id": info.get("driver_node_id"),
    }


def supervisor(dashboard: str, sid: str) -> dict[str, Any]:
    """The job's supervisor actor, from the State API: its row (pid, node)."""
    from ray.util.state import list_actors

    rows = list_actors(
        address=dashboard, filters=[("class_name", "=", "JobSupervisor")], detail=True
    )
    mine = [r for r in rows if str(r.name).endswith(sid) and r.state == "ALIVE"]
    if len(mine) != 1:
        raise RuntimeError(f"set-up: one ALIVE supervisor for {sid} expected: {rows}")
    row = mine[0]
    return {"actor_id": row.actor_id, "name": row.name, "pid": row.pid, "node_id": row.node_id}


def ended(jobs: JobSubmissionClient, sid: str, seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The end of a watched job: transitions, final info and what its log says (or the error
    reading it)."""
    out: dict[str, Any] = {"transitions": seen, "info": info_of(jobs, sid)}
    try:
        out["log"] = log_facts(jobs.get_job_logs(sid))
    except (RuntimeError, OSError) as exc:  # the logs may be on a dead node: recorded
        out["log_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    return out


# -- the experiments' runs --------------------------------------------------------------------


def log_of(dashboard: str, submission_id: str) -> dict[str, Any]:
    """What job ``submission_id``'s log says now (read through the job API)."""
    return log_facts(client(dashboard).get_job_logs(submission_id))


def entrypoint_killed(dashboard: str, hold_s: float, watch_s: float = 60.0) -> dict[str, Any]:
    """JOBS-01/02: a job submitted without entrypoint resources; emits ``entrypoint_running``
    (its PID and node) for the host to SIGKILL; watches it to a terminal status, then for
    ``hold_s`` more (a job is never re-run), then submits the same id again."""
    jobs = client(dashboard)
    sid = jobs.submit_job(entrypoint=ENTRY, submission_id=new_id("killed"))
    run = started(jobs, sid)
    emit("entrypoint_running", **run)
    seen = watch(jobs, sid, watch_s)
    out = {"run": run, **ended(jobs, sid, seen)}
    held = watch(jobs, sid, hold_s, stop=set())
    out["held"] = {"s": hold_s, "transitions": held, "ended": time.time()}
    out["held"]["log"] = log_facts(jobs.get_job_logs(sid))
    try:
        jobs.submit_job(entrypoint=ENTRY, submission_id=sid)
        out["resubmitted"] = {"accepted": True}
    except RuntimeError as exc:  # the SDK's refusal is the outcome under test
        # The SDK raises the dashboard's traceback; Ray's own words are at its end.
        out["resubmitted"] = {
            "accepted": False,
            "error": f"{type(exc).__name__}: …{str(exc)[-600:]}",
        }
    return out


def supervisor_killed(dashboard: str, watch_s: float = 60.0) -> dict[str, Any]:
    """JOBS-03: emits ``supervisor_running`` (the supervisor actor's PID and node) for the host
    to SIGKILL; watches the job to a terminal status."""
    jobs = client(dashboard)
    sid = jobs.submit_job(entrypoint=ENTRY, submission_id=new_id("supervisor"))
    run = started(jobs, sid)
    actor = supervisor(dashboard, sid)
    emit(
        "supervisor_running",
        pid=actor["pid"],
        node_name=run["node_name"],
        entry_pid=run["pid"],
        submission_id=sid,
    )
    seen = watch(jobs, sid, watch_s)
    return {"run": run, "supervisor": actor, **ended(jobs, sid, seen)}


def stopped(dashboard: str, on_term: str, wait_s: int, watch_s: float = 60.0) -> dict[str, Any]:
    """JOBS-04: a job whose entrypoint (with a ``sleep`` child) handles SIGTERM by ``on_term``
    (``exit`` or ``ignore``), its stop wait ``wait_s`` (``RAY_JOB_STOP_WAIT_TIME_S``, an
    integer: Ray parses it with ``int``); ``stop_job`` once it ticks, watched to STOPPED; then
    ``stop_job`` again on the stopped job. Emits ``stopped`` with the PIDs, for the host to
    confirm the whole tree is gone."""
    jobs = client(dashboard)
    sid = jobs.submit_job(
        entrypoint=f"{ENTRY} --child --on-term {on_term}",
        submission_id=new_id(f"stop-{on_term}"),
        runtime_env={"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": str(int(wait_s))}},
    )
    run = started(jobs, sid)
    asked = time.time()
    returned = jobs.stop_job(sid)
    seen = watch(jobs, sid, watch_s)
    out = {"run": run, "asked": asked, "stop_returned": returned, **ended(jobs, sid, seen)}
    again_at = time.time()
    out["stop_again"] = {"t": again_at, "returned": jobs.stop_job(sid)}
    out["stop_again"]["status_after"] = str(jobs.get_job_status(sid).value)
    emit("stopped", node_name=run["node_name"], pids=[run["pid"], run["child"]], on_term=on_term)
    return out


def start_timeout(dashboard: str, watch_s: float) -> dict[str, Any]:
    """JOBS-06: a job whose entrypoint asks for a resource no node has; watched (with its
    PENDING message) until terminal or ``watch_s`` s."""
    jobs = client(dashboard)
    sid = jobs.submit_job(
        entrypoint=ENTRY,
        submission_id=new_id("pending"),
        entrypoint_resources={ABSENT_RESOURCE: 1},
    )
    asked = time.time()
    pending = info_of(jobs, sid)
    seen = watch(jobs, sid, watch_s)
    return {"asked": asked, "pending": pending, **ended(jobs, sid, seen)}


def driver_node_dies(dashboard: str, num_cpus: float, watch_s: float) -> dict[str, Any]:
    """JOBS-01/05: a job with ``entrypoint_num_cpus`` (so not pinned to the head); emits
    ``entrypoint_running`` (its node) for the host to kill that node; watched to a terminal
    status, then its logs asked for."""
    jobs = client(dashboard)
    sid = jobs.submit_job(
        entrypoint=ENTRY, submission_id=new_id("node"), entrypoint_num_cpus=num_cpus
    )
    run = started(jobs, sid)
    emit("entrypoint_running", **run)
    seen = watch(jobs, sid, watch_s)
    return {"run": run, **ended(jobs, sid, seen)}


def long_job(dashboard: str) -> dict[str, Any]:
    """JOBS-07/08: a job that ticks until it is killed, once it runs: its id, PID and node.
    Its entrypoint does not connect to Ray: it runs across the GCS outage GCS-02 judges, and
    a driver's reconnecting GCS client there is load that experiment does not ask for."""
    jobs = client(dashboard)
    sid = jobs.submit_job(entrypoint=f"{ENTRY} --no-ray", submission_id=new_id("long"))
    return started(jobs, sid)


def after_head_restart(
    dashboard: str, submission_id: str, status_s: float, watch_s: float
) -> dict[str, Any]:
    """JOBS-07/08: what the job API says of a job whose head was restarted under it. First
    its status alone for ``status_s`` (served by the dashboard from the GCS's store); then,
    unless it ended, its logs (a call the head's job agent serves) and its status again for
    ``watch_s``; then whether the job list holds it and its final info."""
    jobs = until(lambda: answering(dashboard), lambda c: c is not None, timeout=60)
    if jobs is None:
        raise RuntimeError(f"set-up: the restarted head's dashboard {dashboard} never answered")
    out: dict[str, Any] = {"status_only": watch(jobs, submission_id, status_s)}
    if out["status_only"][-1]["status"] not in TERMINAL:
        out["logs_asked"] = time.time()
        try:
            out["log"] = log_facts(jobs.get_job_logs(submission_id))
        except (RuntimeError, OSError) as exc:  # recorded: the verdict decides
            out["log_error"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
        out["after_logs"] = watch(jobs, submission_id, watch_s)
    out["listed"] = submission_id in {j.submission_id for j in jobs.list_jobs()}
    try:
        out["info"] = info_of(jobs, submission_id)
    except (RuntimeError, OSError) as exc:
        out["info_error"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
    return out
