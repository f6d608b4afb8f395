"""Smoke workloads: where tasks run, and a driver that reports the knobs it sees."""

from __future__ import annotations

import ray
from raychaos_agent import emit, knobs, node_id, pin


@ray.remote(num_cpus=1)
def _where() -> str:
    return node_id()


def node_ids_of_pinned_tasks(nodes: list[str]) -> dict[str, str]:
    """Run one task pinned to each named node; return ``{name: Ray node id it ran on}``."""
    ray.init()
    emit("driver_connected", driver_node=node_id(), knobs=knobs())
    refs = {name: _where.options(scheduling_strategy=pin(name)).remote() for name in nodes}
    return {name: ray.get(ref, timeout=120) for name, ref in refs.items()}


@ray.remote(num_cpus=1)
def hold_task(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return node_id()


@ray.remote(num_cpus=0)
class Holder:
    def where(self) -> str:
        return node_id()


def hold_on(task_node: str, actor_node: str, seconds: float = 60) -> None:
    """A running task named ``hold_task`` on ``task_node`` and an actor ``holder`` on
    ``actor_node``, until ``seconds`` pass: targets for the nemesis's Ray-role lookups."""
    ray.init()
    actor = Holder.options(name="holder", scheduling_strategy=pin(actor_node)).remote()
    ray.get(actor.where.remote(), timeout=120)
    ref = hold_task.options(scheduling_strategy=pin(task_node)).remote(seconds)
    emit("holding", actor_node=actor_node, task_node=task_node)
    ray.get(ref, timeout=seconds + 60)
