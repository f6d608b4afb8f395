"""Workloads for the head and GCS experiments (GCS-01…07).

They run on the driver node, so killing the head or the GCS never kills the driver itself.
Each waits for host signals (``wait_signal``) to line its steps up with the faults.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from raychaos_agent import emit, node_id_of, pin, wait_signal


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


@ray.remote(num_cpus=1, max_retries=0)
def slow_sum(seconds: float) -> int:
    time.sleep(seconds)  # the work itself: a task that is running when the GCS goes down
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


def gcs_outage(worker: str, outage_s: float, signal_timeout: float = 120.0) -> dict[str, Any]:
    """GCS-02/03: what keeps working while the GCS is down, and what comes back after.

    Steps: create a detached named ``Keeper`` (count 1), a 1 MiB object, a task running on
    ``worker``; emit ``ready``. On signal ``gcs_down``: call the Keeper, read the object, get
    the running task's result, and try to create a new actor with a bounded get (expected to
    wait). On signal ``gcs_back``: the pending creation completes, the Keeper is found by name
    with its count kept. Returns what each step saw.
    """
    ray.init(namespace="raychaos-gcs")
    keeper = Keeper.options(
        name="keeper", lifetime="detached", scheduling_strategy=pin(worker)
    ).remote()
    assert ray.get(keeper.incr.remote(), timeout=60) == 1
    blob = ray.put(b"x" * 2**20)
    running = slow_sum.options(scheduling_strategy=pin(worker)).remote(outage_s * 0.6)
    _wait_running("slow_sum", timeout=90)
    # Resolved now: it needs the GCS. Pinned to the worker, because the head's own raylet is
    # replaced when the head restarts, and an actor placed there would die with it.
    on_worker = pin(worker)
    emit("ready", worker_node=node_id_of(worker))
    seen: dict[str, Any] = {"down_at": wait_signal("gcs_down", signal_timeout)}

    started = time.monotonic()
    step = min(5.0, outage_s)
    for key, call in (
        ("keeper_during", lambda: ray.get(keeper.incr.remote(), timeout=step)),
        ("object_during", lambda: len(ray.get(blob, timeout=step))),
        ("running_task_result", lambda: ray.get(running, timeout=outage_s)),
    ):
        try:
            seen[key] = call()
        except Exception as exc:  # noqa: BLE001 - the outcome under test, reported as data
            seen[key + "_error"] = _err(exc)
        emit("step", name=key, ok=key in seen, seconds=round(time.monotonic() - started, 2))
    # Registering an actor is a synchronous GCS call in the driver: it blocks while the GCS
    # is down. Make it in a thread and see whether it finished within a bounded wait.
    created: dict[str, Any] = {}

    def create() -> None:
        try:
            handle = Fresh.options(scheduling_strategy=on_worker).remote()
            created["pong"] = ray.get(handle.ping.remote(), timeout=180)
        except Exception as exc:  # noqa: BLE001 - reported as data
            created["error"] = _err(exc)

    creator = threading.Thread(target=create, daemon=True)
    creator.start()
    creator.join(3.0)
    seen["new_actor_during"] = "waiting" if creator.is_alive() else str(created)
    seen["during_s"] = round(time.monotonic() - started, 2)
    emit("outage_checked", **{k: v for k, v in seen.items() if not isinstance(v, dict)})

    seen["back_at"] = wait_signal("gcs_back", signal_timeout)
    creator.join(150)
    seen["pending_actor_after"] = created.get("pong", created.get("error", "still waiting"))
    again = ray.get_actor("keeper", namespace="raychaos-gcs")
    seen["keeper_after"] = ray.get(again.incr.remote(), timeout=60)
    ray.kill(again)
    emit("recovered", keeper_after=seen["keeper_after"])
    return seen


def long_driver(seconds: float) -> dict[str, Any]:
    """GCS-01/05: a driver that keeps submitting short tasks; reports how it ends."""
    ray.init()
    emit("ready")
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
