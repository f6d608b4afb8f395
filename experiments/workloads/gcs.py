"""Workloads for the head and GCS experiments (GCS-01…07).

They run on the driver node, so killing the head or the GCS never kills the driver itself.
Each waits for host signals (``wait_signal``) to line its steps up with the faults. Outcomes
under test are returned as data (``_err``); a workload raises only when its set-up failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from raychaos_agent import emit, node_id_of, pin, wait_signal

#: Bytes of the object another process owns on another node (plasma, not inlined: > 100 KiB).
BLOB_BYTES = 8 * 2**20
#: How often the running task records that it is still working: 0.2 s, 30 ticks over the
#: 6 s it works past the signal (test_gcs.py AFTER_S), of which the experiment asks for half
#: (a task starved on a loaded host ticks late, not never).
TICK_S = 0.2


@ray.remote(num_cpus=0)
class Keeper:
    """A detached, named counter: its state must survive a GCS restart with persistence."""

    def __init__(self) -> None:
        self.count = 0

    def incr(self) -> int:
        self.count += 1
        return self.count


@ray.remote(num_cpus=0)
class Fresh:
    def ping(self) -> str:
        return "pong"


@ray.remote(num_cpus=0)
class Holder:
    """Owns an object in its own node's store: readers elsewhere must ask it and pull it."""

    def make(self, nbytes: int) -> tuple[list[ray.ObjectRef], int]:
        data = bytes(range(256)) * (nbytes // 256)
        self.ref = ray.put(data)  # owned by this actor's process, stored on this node
        return [self.ref], sum(data[::4096])


@ray.remote(num_cpus=1, max_retries=0)
def long_task(signal: str, after_s: float, signal_timeout: float) -> dict[str, Any]:
    """A task that is provably running across the fault: it records its start, waits for the
    host's ``signal`` raised on its own node once the GCS is down, keeps working ``after_s``
    more seconds (one tick per ``TICK_S``) and returns those wall-clock times."""
    started = time.time()
    seen = wait_signal(signal, signal_timeout)
    ticks = []
    while time.time() - seen < after_s:
        time.sleep(TICK_S)  # the work itself: a task still in progress during the outage
        ticks.append(time.time())
    return {
        "started_at": started,
        "signal_at": seen,
        "ticks_after_signal": len(ticks),
        "last_tick_at": ticks[-1] if ticks else seen,
        "ended_at": time.time(),
        "node_id": ray.get_runtime_context().get_node_id(),
    }


@ray.remote(num_cpus=0, max_retries=0)
def in_new_worker() -> int:
    """Runs in a worker process the raylet has to start (no idle one exists on its node)."""
    import os

    return os.getpid()


@ray.remote(num_cpus=1, max_retries=0)
def slow_sum(seconds: float) -> int:
    time.sleep(seconds)  # the work itself
    return 42


def _wait_running(name: str, timeout: float) -> None:
    """Until the State API shows a task ``name`` RUNNING (its worker process is up)."""
    from ray.util.state import list_tasks

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list_tasks(
            filters=[("name", "=", name), ("state", "=", "RUNNING")], raise_on_missing_output=False
        ):
            return
        time.sleep(0.2)  # polling period of a bounded wait
    raise TimeoutError(f"task {name} not RUNNING within {timeout:.0f} s")


def _err(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "bases": [c.__name__ for c in type(exc).__mro__[1:]],
        "message": str(exc)[:500],
    }


class Attempt:
    """One operation the GCS must serve, tried while it is down: ``submit`` (which may itself
    block on the GCS) runs in a thread, then a bounded ``ray.get`` of what it returned.

    What is recorded: how long the submit call took (or that it was still blocked), and the
    bounded get's value or exception. After recovery :meth:`finish` waits for the outcome.
    """

    def __init__(self, name: str, submit: Callable[[], Any], get_s: float) -> None:
        self.name = name
        self.submit = submit
        self.get_s = get_s
        self.ref: Any = None
        self.t0 = time.monotonic()
        self.during: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, name=f"attempt-{name}", daemon=True)

    def start(self) -> Attempt:
        self.thread.start()
        return self

    def _run(self) -> None:
        t0 = self.t0 = time.monotonic()
        try:
            self.ref = self.submit()
        except Exception as exc:  # noqa: BLE001 - the outcome under test, reported as data
            self.during.update(submit_s=round(time.monotonic() - t0, 2), submit_error=_err(exc))
            return
        t1 = time.monotonic()
        self.during.update(submit_s=round(t1 - t0, 2), submitted_at=round(time.time(), 3))
        try:
            self.during["value"] = repr(ray.get(self.ref, timeout=self.get_s))
        except Exception as exc:  # noqa: BLE001 - GetTimeoutError is the documented outcome
            self.during["error"] = _err(exc)
        self.during["get_s"] = round(time.monotonic() - t1, 2)

    def join(self, deadline: float) -> dict[str, Any]:
        """What the attempt saw during the outage, by ``deadline`` (monotonic); a submit call
        still blocked then is recorded as such (its thread keeps waiting for the GCS)."""
        self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread.is_alive() and "submit_s" not in self.during:
            return {"submit_blocked_s": round(time.monotonic() - self.t0, 2)}
        return dict(self.during)

    def finish(self, timeout: float) -> dict[str, Any]:
        """After recovery: the outcome of the same operation, waited for up to ``timeout``."""
        t0 = time.monotonic()
        self.thread.join(timeout)
        submit = {k: self.during.get(k) for k in ("submit_s", "submitted_at")}
        if self.ref is None:
            error = self.during.get("submit_error", "submit never returned")
            return {"ok": False, "error": error, **submit}
        try:
            value = ray.get(self.ref, timeout=max(1.0, timeout - (time.monotonic() - t0)))
            outcome = {"ok": True, "value": repr(value)}
        except Exception as exc:  # noqa: BLE001 - reported as data
            outcome = {"ok": False, "error": _err(exc)}
        return {**outcome, **submit, "done_at": round(time.time(), 3)}


def gcs_outage(
    worker: str,
    other: str,
    get_s: float,
    after_s: float,
    signal_timeout: float = 180.0,
) -> dict[str, Any]:
    """GCS-02/03: what keeps working while the GCS is down, what waits, and what comes back.

    Set-up (GCS up): a detached named ``Keeper`` on ``worker`` (count 1); a ``Holder`` actor on
    ``other`` owning an object in ``other``'s store (never read by the driver before the
    outage, so a read must ask the owner and pull it across nodes); ``long_task`` RUNNING on
    ``worker``. Emits ``ready``.

    On signal ``gcs_down``: call the Keeper, read the Holder's object, get the running task's
    result (it keeps working ``after_s`` s past the signal), and start the operations the docs
    list as unavailable — an actor creation, a placement group, a task that needs a new worker
    process on ``other`` — each followed by ``ray.get(timeout=get_s)``. Emits
    ``outage_checked``. On signal ``gcs_back``: the same operations complete, the Keeper is
    found by name with its count. Returns what each step saw.
    """
    ray.init(namespace="raychaos-gcs")
    keeper = Keeper.options(
        name="keeper", lifetime="detached", scheduling_strategy=pin(worker)
    ).remote()
    assert ray.get(keeper.incr.remote(), timeout=60) == 1
    holder = Holder.options(scheduling_strategy=pin(other)).remote()
    (blob,), checksum = ray.get(holder.make.remote(BLOB_BYTES), timeout=60)
    from ray.experimental import get_object_locations

    # The owner answers where the object is: on ``other`` only, not on the driver's node.
    where = get_object_locations([blob], timeout_ms=30_000)[blob]
    running = long_task.options(scheduling_strategy=pin(worker)).remote(
        "gcs_down", after_s, signal_timeout
    )
    _wait_running("long_task", timeout=90)
    # Export the actor class and the task's function now: the first ``.remote()`` of each puts
    # its definition into the GCS, and the outage checks are about creating, not exporting.
    # Both land on ``worker``, so ``other`` still has no idle worker process to reuse.
    warm = Fresh.options(scheduling_strategy=pin(worker)).remote()
    ray.get(
        [warm.ping.remote(), in_new_worker.options(scheduling_strategy=pin(worker)).remote()],
        timeout=120,
    )
    # Resolved now: resolving a node id needs the GCS. Pinned to ``other``, because the head's
    # raylet is replaced when the head restarts, and an actor placed there would die with it.
    on_other = NodeAffinitySchedulingStrategy(node_id=node_id_of(other), soft=False)
    emit(
        "ready",
        worker_node=node_id_of(worker),
        other_node=on_other.node_id,
        blob_nodes=where.get("node_ids"),
        blob_size=where.get("object_size"),
    )
    seen: dict[str, Any] = {
        "blob_nodes_before": where.get("node_ids"),
        "down_at": wait_signal("gcs_down", signal_timeout),
    }

    started = time.monotonic()
    for key, call in (
        ("keeper_during", lambda: ray.get(keeper.incr.remote(), timeout=get_s)),
        ("object_during", lambda: sum(ray.get(blob, timeout=get_s)[::4096]) == checksum),
        ("running_task", lambda: ray.get(running, timeout=after_s + 3 * get_s)),
    ):
        t0 = time.time()
        try:
            seen[key] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome under test, reported as data
            seen[key + "_error"] = _err(exc)
        seen[key + "_at"] = [round(t0, 3), round(time.time(), 3)]
        emit("step", name=key, ok=key in seen, seconds=round(time.time() - t0, 2))

    pg_holder: list[Any] = []

    def create_pg() -> Any:
        pg = placement_group([{"CPU": 1}], strategy="PACK")
        pg_holder.append(pg)
        return pg.ready()

    attempts = [
        Attempt(
            "actor_creation",
            lambda: Fresh.options(scheduling_strategy=on_other).remote().ping.remote(),
            get_s,
        ),
        Attempt("placement_group", create_pg, get_s),
        Attempt(
            "worker_start",
            lambda: in_new_worker.options(scheduling_strategy=on_other).remote(),
            get_s,
        ),
    ]
    for attempt in attempts:
        attempt.start()
    deadline = time.monotonic() + get_s + 5  # the bounded gets, plus a loaded host's lag
    for attempt in attempts:
        seen[attempt.name + "_during"] = attempt.join(deadline)
    seen["during_s"] = round(time.monotonic() - started, 2)
    emit("outage_checked", **seen)

    seen["back_at"] = wait_signal("gcs_back", signal_timeout)
    for attempt in attempts:
        seen[attempt.name + "_after"] = attempt.finish(150)
    for pg in pg_holder:
        remove_placement_group(pg)
    again = ray.get_actor("keeper", namespace="raychaos-gcs")
    seen["keeper_after"] = ray.get(again.incr.remote(), timeout=60)
    ray.kill(again)
    emit("recovered", keeper_after=seen["keeper_after"])
    return seen


def long_driver(seconds: float) -> dict[str, Any]:
    """GCS-01/04: a driver that keeps submitting short tasks; reports how it ends."""
    ray.init()
    emit("ready", job_id=ray.get_runtime_context().get_job_id())
    deadline = time.monotonic() + seconds
    done = 0
    try:
        while time.monotonic() < deadline:
            ray.get(slow_sum.options(max_retries=0).remote(0.05), timeout=30)
            done += 1
            if done % 10 == 0:
                emit("progress", done=done)
    except Exception as exc:
        emit("driver_error", error=_err(exc), done=done)
        raise
    return {"done": done}


def old_client(signal: str, signal_timeout: float = 180.0) -> dict[str, Any]:
    """GCS-05: a driver of the old cluster that calls the GCS once the head came back without
    persistence. Each call's outcome is emitted as it happens (the driver may die with its
    node's raylet at any point); returns them all if it lives that long."""
    ray.init(namespace="raychaos-gcs")
    emit("ready", job_id=ray.get_runtime_context().get_job_id())
    wait_signal(signal, signal_timeout)
    seen: dict[str, Any] = {}
    calls: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("ray.nodes", lambda: len(ray.nodes())),
        ("ray.get_actor", lambda: ray.get_actor("nobody-has-this")),
        ("actor_creation", lambda: ray.get(Fresh.remote().ping.remote(), timeout=30)),
    )
    for name, call in calls:
        t0 = time.time()
        emit("gcs_call_start", name=name)
        try:
            outcome: dict[str, Any] = {"ok": True, "value": repr(call())}
        except Exception as exc:  # noqa: BLE001 - the outcome under test, reported as data
            outcome = {"ok": False, "error": _err(exc)}
        outcome["seconds"] = round(time.time() - t0, 2)
        seen[name] = outcome
        emit("gcs_call", name=name, **outcome)
    return seen


def task_survives_partition(worker: str, seconds: float) -> dict[str, Any]:
    """NET-01: a retriable task starts on ``worker`` (soft affinity), which is then cut off.

    Emits ``running`` with the first node; returns the node the task finally completed on.
    """
    ray.init()

    @ray.remote(num_cpus=1, max_retries=3)
    def work(seconds: float) -> str:
        emit("attempt", node=ray.get_runtime_context().get_node_id())
        time.sleep(seconds)  # long enough to be running when the partition strikes
        return ray.get_runtime_context().get_node_id()

    target = node_id_of(worker)
    ref = work.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=target, soft=True)
    ).remote(seconds)
    emit("submitted", first_node=target)
    return {"first_node": target, "completed_on": ray.get(ref, timeout=300)}
