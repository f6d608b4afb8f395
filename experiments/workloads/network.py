"""Workloads for the network-partition experiments (NET-01, NET-02).

They run on the node hosting the drivers (the head: the experiments have no driver node),
which stays on the majority side of every partition, so the driver is the owner that has to
notice a task lost behind the cut.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from raychaos_agent import emit, node_id_of, wait_signal

#: The task's name in the State API (the host reads its attempts there).
PARTITIONED_TASK = "net01_partitioned_task"


@ray.remote(num_cpus=1, max_retries=3)
def partitioned_work(seconds: float) -> str:
    emit("attempt", node=ray.get_runtime_context().get_node_id())
    time.sleep(seconds)  # the work itself: long enough to be running when the cut strikes
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0)
class SlotHolder:
    """Holds a node's only ``slot`` resource, so a retry needing it has no room there."""

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()


def task_survives_partition(
    worker: str,
    seconds: float,
    get_s: float = 600,
    slot: str | None = None,
    held_on: str | None = None,
) -> dict[str, Any]:
    """NET-01: a retriable task starts on ``worker`` (soft affinity), which is then cut off.

    With ``slot``, the task needs that custom resource and an actor holds it on ``held_on``
    (emits ``held``) until the host raises signal ``release``: the retry has no room anywhere.
    Each attempt emits ``attempt`` with its node; returns the node the task completed on and
    the seconds from submission to the result.
    """
    ray.init()
    target = node_id_of(worker)
    holder = None
    if slot is not None and held_on is not None:
        holder = SlotHolder.options(
            resources={slot: 1},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id_of(held_on), soft=False),
        ).remote()
        emit("held", node=ray.get(holder.ready.remote(), timeout=120))
    started = time.monotonic()
    ref = partitioned_work.options(
        name=PARTITIONED_TASK,
        resources={slot: 1} if slot is not None else {},
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=target, soft=True),
    ).remote(seconds)
    emit("submitted", first_node=target)
    if holder is not None:
        emit("released", at=wait_signal("release", timeout=get_s))
        ray.kill(holder)
    completed_on = ray.get(ref, timeout=get_s)
    return {
        "first_node": target,
        "completed_on": completed_on,
        "seconds": round(time.monotonic() - started, 2),
    }
