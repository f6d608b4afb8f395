"""Task fault-tolerance workloads (claims TASK-01 … TASK-05) and helpers shared by the
objects, actors and nodes workloads.

Convention for every workload in ``tasks``, ``objects``, ``actors`` and ``nodes``: the Ray
exception under test is **caught and returned as data** (``describe(exc)``: type, bases,
module, message, ``reason`` name where Ray has one) inside the returned dict, next to the
evidence an experiment needs (attempt counts, node ids, State API rows, timestamps). A workload
raises only when the harness or the experiment set-up is wrong (e.g. a node that should be there
is not), so ``run.result()`` raising means "broken", never "Ray behaved differently".

Keyword names avoid ``node``, ``timeout`` and ``env``: ``Cluster.run`` takes those itself.
All timestamps are wall-clock ``time.time()`` (comparable with host-side events).
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import signal
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import ray
from raychaos_agent import drivers_node, emit, knobs, node_id, nodes, pin, until

# --------------------------------------------------------------------------------------------
# Shared helpers (imported by objects, actors, nodes)
# --------------------------------------------------------------------------------------------

_REASON_RE = re.compile(r"\n\[([A-Z_]+)\] ")


def describe(exc: BaseException) -> dict[str, Any]:
    """A JSON description of a (Ray) exception; ``reason`` is the ErrorType *name*."""
    info: dict[str, Any] = {
        "type": type(exc).__name__,
        "bases": [c.__name__ for c in type(exc).__mro__[1:] if c is not object],
        "module": type(exc).__module__,
        "message": str(exc)[:3000],
    }
    reason = getattr(exc, "reason", None)
    if reason is not None:
        name = None
        try:
            name = ray.exceptions.ErrorType.Name(reason)  # the enum Ray itself prints
        except Exception:  # noqa: BLE001 - fall back to what the message says
            match = _REASON_RE.search(str(exc))
            name = match.group(1) if match else str(reason)
        info["reason"] = name
    for attr in ("actor_id", "preempted", "actor_init_failed"):
        try:
            value = getattr(exc, attr, None)
        except Exception:  # noqa: BLE001
            value = None
        if value is not None and not callable(value):
            info[attr] = value if isinstance(value, int | float | bool) else str(value)
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        info["cause"] = describe(cause)
    # RayTaskError(X) is also an X: record the user-visible isinstance facts.
    info["is_RayTaskError"] = isinstance(exc, ray.exceptions.RayTaskError)
    return info


def outcome_of(ref: Any, timeout: float) -> dict[str, Any]:
    """``ray.get(ref)`` as data: its value or its error (:func:`describe`), and seconds taken."""
    started = time.time()
    try:
        value = ray.get(ref, timeout=timeout)
        return {"value": value, "error": None, "s": round(time.time() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - Ray's error is the data under test
        return {"value": None, "error": describe(exc), "s": round(time.time() - started, 3)}


def connect() -> str:
    """ray.init() once; emit ``driver_connected`` with the knobs; return the driver node id.

    The State API is imported before ``ray.init()``: it pulls in ``ray.autoscaler``, which the
    driver's log thread also imports (``worker.py`` ``filter_autoscaler_events``, on the first
    autoscaler event line). Two threads importing them at once raise "cannot import name …
    from partially initialized module 'ray.autoscaler._private.util'" in both: 5 of 30 tries
    on 2.50.1, 3 of 30 on 2.55.1, 0 of 30 on 2.60.0 (TASK-03 failed so on 2.50.1).
    """
    if not ray.is_initialized():
        for module in ("ray.autoscaler.v2.utils", "ray.util.state"):
            importlib.import_module(module)  # before ray.init() starts the log thread
        ray.init()
    me = node_id()
    emit("driver_connected", driver_node=me, knobs=knobs(), ray_version=ray.__version__)
    return me


#: Where every node writes Ray's logs (the cluster plan's RAY_LOGS).
RAY_LOGS = "/tmp/ray/session_latest/logs"


def owner_log() -> str | None:
    """This driver's own core-worker log (``python-core-driver-<worker id>_<pid>.log``)."""
    wid = ray.get_runtime_context().get_worker_id()
    paths = glob.glob(f"{RAY_LOGS}/python-core-driver-{wid}_{os.getpid()}.log")
    return paths[0] if paths else None


def name_of(nid: str | None) -> str | None:
    """The raychaos node name (``worker-1`` …) of a Ray node id, via its IP."""
    if not nid:
        return None
    ip = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == nid), None)
    return next((name for name, n in nodes().items() if n.get("ip") == ip), None)


def node_record(nid: str) -> dict[str, Any] | None:
    """``ray.nodes()`` row of ``nid`` without the bulky resource maps."""
    for row in ray.nodes():
        if row["NodeID"] == nid:
            return {k: v for k, v in row.items() if k not in ("Resources", "Labels")}
    return None


def wait_node_dead(nid: str, wait_s: float = 120.0) -> dict[str, Any]:
    """Poll ``ray.nodes()`` (no dashboard needed) until ``nid`` is not Alive.

    Returns ``{"dead": bool, "t_dead_seen": wall time or None, "record": row}`` and emits
    ``node_dead_seen``.
    """
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        row = node_record(nid)
        if row is not None and not row.get("Alive", True):
            t = time.time()
            emit("node_dead_seen", node_id=nid, t_dead_seen=t)
            return {"dead": True, "t_dead_seen": t, "record": row}
        time.sleep(0.1)
    return {"dead": False, "t_dead_seen": None, "record": node_record(nid)}


def state_node(nid: str, want: str | None = None, wait_s: float = 30.0) -> dict[str, Any] | None:
    """The State API view (``list_nodes``) of one node: state, state_message, death info.

    With ``want`` ("DEAD", "ALIVE") it polls, bounded by ``wait_s``, until the row shows that
    state: the State API lags the GCS by a second, several on a loaded host.
    """
    return until(
        lambda: _state_node_once(nid),
        lambda row: want is None or (row or {}).get("state") == want,
        wait_s,
    )


def _state_node_once(nid: str) -> dict[str, Any] | None:
    from ray.util.state import list_nodes

    try:
        rows = list_nodes(
            filters=[("node_id", "=", nid)], detail=True, raise_on_missing_output=False
        )
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if not rows:
        return None
    row = rows[0]
    return {
        k: _jsonable(getattr(row, k, None))
        for k in ("node_id", "node_ip", "state", "state_message", "end_time_ms", "start_time_ms")
    }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, int | float | bool | str):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


_TERMINAL = {"FINISHED", "FAILED"}


def task_attempts(
    name: str, expect: int | None = None, wait_s: float = 15.0
) -> list[dict[str, Any]]:
    """State API rows (one per attempt) of tasks called ``name``, oldest attempt first.

    Polls until the last attempt is terminal (and, if ``expect`` is given, until that many
    attempts are listed), because the State API lags about a second.
    """
    from ray.util.state import list_tasks

    deadline = time.monotonic() + wait_s
    rows: list[dict[str, Any]] = []
    while True:
        try:
            raw = list_tasks(
                filters=[("name", "=", name)],
                detail=True,
                limit=1000,
                raise_on_missing_output=False,
            )
            rows = sorted(
                (
                    {
                        k: _jsonable(getattr(t, k, None))
                        for k in (
                            "task_id",
                            "attempt_number",
                            "state",
                            "error_type",
                            "node_id",
                            "worker_pid",
                            "error_message",
                        )
                    }
                    for t in raw
                ),
                key=lambda r: r["attempt_number"] or 0,
            )
            for r in rows:
                if r.get("error_message"):
                    r["error_message"] = str(r["error_message"])[:300]
        except Exception as exc:  # noqa: BLE001 - State API can fail transiently
            rows = [{"state_api_error": f"{type(exc).__name__}: {exc}"[:300]}]
        done = bool(rows) and rows[-1].get("state") in _TERMINAL
        if expect is not None:
            done = done and len(rows) >= expect
        if done or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


@ray.remote(num_cpus=0, max_restarts=0)
class Tally:
    """Counts executions per key; lives on the driver node, which no experiment kills."""

    def __init__(self) -> None:
        self.hits: dict[str, list[dict[str, Any]]] = {}

    def hit(self, key: str, where: str, pid: int) -> int:
        self.hits.setdefault(key, []).append({"node_id": where, "pid": pid, "t": time.time()})
        return len(self.hits[key])

    def get(self, key: str) -> list[dict[str, Any]]:
        return self.hits.get(key, [])


def make_tally() -> Any:
    """A :class:`Tally` actor pinned to the node hosting the drivers (zero CPUs): the driver
    node, or the head of a cluster without one (whose experiments never strike the head)."""
    return Tally.options(scheduling_strategy=pin(drivers_node())).remote()


def _token(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------
# TASK-01 / TASK-02: worker process crash and the retry budget
# --------------------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
def _crashy(tally: Any, key: str, crash_attempts: int) -> dict[str, Any]:
    n = ray.get(tally.hit.remote(key, node_id(), os.getpid()))
    if crash_attempts < 0 or n <= crash_attempts:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies as if SIGKILLed from outside
        time.sleep(60)
    return {"attempt": n, "node_id": node_id(), "pid": os.getpid()}


def worker_crash_retries(
    max_retries: int | None = None,
    crash_attempts: int = -1,
    on: str = "worker-1",
    get_timeout_s: float = 120.0,
) -> dict[str, Any]:
    """TASK-01 / TASK-02: a task whose worker process SIGKILLs itself.

    ``crash_attempts``: the first N executions die (-1: every execution). ``max_retries=None``
    does not pass the option (Ray's default, or ``RAY_TASK_MAX_RETRIES`` from the driver's env:
    pass it with ``cluster.run(..., env={"RAY_TASK_MAX_RETRIES": "1"})``). The task is pinned to
    ``on``. No host fault is needed. Returns ``executions`` (counted by an actor on the
    driver node), ``value`` or ``error`` (``WorkerCrashedError`` expected once the budget is
    spent), and the State API ``attempts`` rows (``error_type`` WORKER_DIED expected).
    """
    connect()
    tally = make_tally()
    key = _token("crash")
    opts: dict[str, Any] = {"name": key, "scheduling_strategy": pin(on)}
    if max_retries is not None:
        opts["max_retries"] = max_retries
    emit(
        "task_submitted",
        name=key,
        max_retries=max_retries,
        env_default=os.environ.get("RAY_TASK_MAX_RETRIES"),
    )
    started = time.time()
    out: dict[str, Any] = {
        "name": key,
        "max_retries": max_retries,
        "RAY_TASK_MAX_RETRIES": os.environ.get("RAY_TASK_MAX_RETRIES"),
    }
    try:
        out["value"] = ray.get(
            _crashy.options(**opts).remote(tally, key, crash_attempts), timeout=get_timeout_s
        )
        out["error"] = None
    except ray.exceptions.GetTimeoutError:
        raise
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        out["error"] = describe(exc)
    out["seconds"] = round(time.time() - started, 2)
    out["executions"] = len(ray.get(tally.get.remote(key)))
    out["attempts"] = task_attempts(key, expect=out["executions"])
    return out


# --------------------------------------------------------------------------------------------
# TASK-03: application exceptions and retry_exceptions
# --------------------------------------------------------------------------------------------


class AppError(Exception):
    """The application exception a task raises (not a Ray exception)."""


_ERRORS: dict[str, type[BaseException]] = {
    "AppError": AppError,
    "ValueError": ValueError,
    "KeyError": KeyError,
    "RuntimeError": RuntimeError,
}


@ray.remote(num_cpus=1)
def _raiser(tally: Any, key: str, raise_type: str, fail_attempts: int) -> int:
    n = ray.get(tally.hit.remote(key, node_id(), os.getpid()))
    if fail_attempts < 0 or n <= fail_attempts:
        raise _ERRORS[raise_type](f"attempt {n} failed on purpose")
    return n


def app_exception_retries(
    raise_type: str = "AppError",
    max_retries: int | None = None,
    retry_exceptions: bool | list[str] | None = None,
    fail_attempts: int = -1,
    on: str = "worker-1",
) -> dict[str, Any]:
    """TASK-03: a task that raises ``raise_type`` on its first ``fail_attempts`` executions.

    ``retry_exceptions``: None (option not passed), True/False, or a list of type names among
    AppError, ValueError, KeyError, RuntimeError. No host fault. Returns ``executions``,
    ``value`` or ``error`` plus ``isinstance_cause`` (is the caught error also a
    ``raise_type``?) and the State API ``attempts``.
    """
    connect()
    tally = make_tally()
    key = _token("raise")
    opts: dict[str, Any] = {"name": key, "scheduling_strategy": pin(on)}
    if max_retries is not None:
        opts["max_retries"] = max_retries
    if isinstance(retry_exceptions, list):
        opts["retry_exceptions"] = [_ERRORS[n] for n in retry_exceptions]
    elif retry_exceptions is not None:
        opts["retry_exceptions"] = retry_exceptions
    out: dict[str, Any] = {
        "name": key,
        "raise_type": raise_type,
        "max_retries": max_retries,
        "retry_exceptions": retry_exceptions,
    }
    try:
        out["value"] = ray.get(
            _raiser.options(**opts).remote(tally, key, raise_type, fail_attempts), timeout=120
        )
        out["error"] = None
    except ray.exceptions.GetTimeoutError:
        raise
    except Exception as exc:  # noqa: BLE001
        out["error"] = describe(exc)
        out["isinstance_cause"] = isinstance(exc, _ERRORS[raise_type])
    out["executions"] = len(ray.get(tally.get.remote(key)))
    out["attempts"] = task_attempts(key, expect=out["executions"])
    return out


# --------------------------------------------------------------------------------------------
# TASK-04 / TASK-05: the node running a task dies
# --------------------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
def _long_task(tally: Any, key: str, hold_s: float) -> dict[str, Any]:
    n = ray.get(tally.hit.remote(key, node_id(), os.getpid()))
    if n == 1:
        time.sleep(hold_s)  # the first execution waits to be struck
    return {"execution": n, "node_id": node_id(), "pid": os.getpid()}


def task_on_dying_node(
    on: str = "worker-1",
    max_retries: int | None = 0,
    soft: bool = False,
    retry_exceptions: bool | None = None,
    hold_s: float = 300.0,
    get_timeout_s: float = 180.0,
) -> dict[str, Any]:
    """TASK-04 (``max_retries=0``) / TASK-05 (``max_retries>0, soft=True``).

    A task pinned to ``on`` (``soft=True`` lets a retry run elsewhere) holds for
    ``hold_s``; the workload emits ``task_running`` (fields ``node_id``, ``node_name``, ``pid``)
    once it executes. HOST: wait for ``task_running``, then kill ``on``'s container (or its
    raylet). The workload then blocks in ``ray.get`` and records ``t_outcome``; a background
    thread polls ``ray.nodes()`` from ``task_running`` on and records when the node is first
    seen not Alive (``t_dead_seen``), so the host can compare both with its kill time. Returns ``value`` (TASK-05: ``node_id`` differs from the first)
    or ``error`` (TASK-04: ``NodeDiedError``), ``executions``, ``attempts``, ``node_record``.
    """
    connect()
    tally = make_tally()
    key = _token("long")
    opts: dict[str, Any] = {"name": key, "scheduling_strategy": pin(on, soft=soft)}
    if max_retries is not None:
        opts["max_retries"] = max_retries
    if retry_exceptions is not None:
        opts["retry_exceptions"] = retry_exceptions
    ref = _long_task.options(**opts).remote(tally, key, hold_s)
    deadline = time.monotonic() + 120
    while not ray.get(tally.get.remote(key)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"task {key} never started on {on}")
        time.sleep(0.1)
    first = ray.get(tally.get.remote(key))[0]
    emit(
        "task_running",
        node_id=first["node_id"],
        node_name=name_of(first["node_id"]),
        pid=first["pid"],
        name=key,
    )
    out: dict[str, Any] = {
        "name": key,
        "first_node_id": first["node_id"],
        "first_node_name": name_of(first["node_id"]),
    }
    import threading

    dead: dict[str, Any] = {}
    watcher = threading.Thread(
        target=lambda: dead.update(wait_node_dead(first["node_id"], wait_s=get_timeout_s)),
        daemon=True,
    )
    watcher.start()  # measures when the GCS marks the node dead, independently of ray.get
    try:
        out["value"] = ray.get(ref, timeout=get_timeout_s)
        out["value_node_name"] = name_of(out["value"]["node_id"])
        out["error"] = None
    except ray.exceptions.GetTimeoutError:
        raise
    except Exception as exc:  # noqa: BLE001
        out["error"] = describe(exc)
    out["t_outcome"] = time.time()
    emit("task_outcome", ok=out["error"] is None)
    watcher.join(60)
    out["t_dead_seen"] = dead.get("t_dead_seen")
    out["node_record"] = dead.get("record")
    out["executions"] = ray.get(tally.get.remote(key))
    out["attempts"] = task_attempts(key, expect=len(out["executions"]))
    out["failure_cause"] = failure_cause_lines()
    return out


#: The owner's log line when its question to the dead node's raylet, why the task's worker
#: failed, itself fails (``NormalTaskSubmitter::HandleGetWorkerFailureCause``): it then
#: fails or retries the task as NODE_DIED.
FAILURE_CAUSE = "Failed to fetch worker failure cause"
#: The stamp that starts a Ray log line (the container's clock, UTC).
LOG_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def log_stamp(line: str | None) -> float | None:
    """The time a Ray log line was written (seconds since the epoch), or None."""
    found = LOG_STAMP.match(line or "")
    if not found:
        return None
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()


def failure_cause_lines() -> list[dict[str, Any]]:
    """This driver's log lines saying it could not ask a raylet why a worker failed: each
    line (its start) and its time (the container's clock, UTC)."""
    path = owner_log()
    found: list[dict[str, Any]] = []
    if path:
        with open(path, errors="replace") as log:
            for line in log:
                if FAILURE_CAUSE in line:
                    found.append({"t": log_stamp(line), "line": line.strip()[:400]})
    return found
