"""The template's workload: it runs inside the cluster, started by ``cluster.run``.

A task pinned to a node holds in its first execution until the host kills its worker process;
Ray retries it (``max_retries=1``) and the retry returns. The workload says where to strike
(``emit``) and reports what happened; the experiment judges it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import ray
from raychaos_agent import emit, node_id, pin, until


@ray.remote(num_cpus=0)
class Executions:
    """Counts the task's executions, outside the process the host kills."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def started(self, pid: int) -> int:
        self.pids.append(pid)
        return len(self.pids)

    def seen(self) -> list[int]:
        return list(self.pids)


@ray.remote(max_retries=1)
def _held(log: Any, hold_s: float) -> dict[str, Any]:
    execution = ray.get(log.started.remote(os.getpid()))
    if execution == 1:
        time.sleep(hold_s)  # the first execution waits to be struck
    return {"execution": execution, "node_id": node_id()}


def crash_once(on: str = "worker-1", hold_s: float = 300.0) -> dict[str, Any]:
    ray.init()
    log = Executions.remote()
    ref = _held.options(scheduling_strategy=pin(on)).remote(log, hold_s)
    pids = until(lambda: ray.get(log.seen.remote()), lambda p: len(p) >= 1, timeout=120)
    if not pids:
        raise RuntimeError(f"the task never started on {on}")
    emit("running", node_name=on, pid=pids[0])  # the host strikes here: KILL_PROCESS
    value = ray.get(ref, timeout=120)
    return {"value": value, "executions": len(ray.get(log.seen.remote()))}
