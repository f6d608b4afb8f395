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
