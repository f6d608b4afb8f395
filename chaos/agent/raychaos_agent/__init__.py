"""The agent API that workloads use inside the cluster (shipped into every node).

Workloads report through :func:`emit`: one JSON line per event, marked so the host can tell it
from anything else the driver prints, stamped with wall-clock time (containers share the host
kernel's clock, so host and cluster timestamps are comparable).

This module imports Ray lazily: it must load under any Ray version the cluster runs.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Lines starting with this are events; everything else a driver prints is output.
MARK = "@@raychaos "
_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """Record ``event`` with ``fields`` (JSON-able) and the current wall-clock time."""
    record = {"t": time.time(), "event": event, **fields}
    line = MARK + json.dumps(record, default=repr, separators=(",", ":"))
    out = sys.__stdout__ or sys.stdout  # the real stdout, even if a workload redirected it
    with _lock:
        out.write(line + "\n")
        out.flush()


def nodes() -> dict[str, dict[str, str]]:
    """``{node name: {"ip": …, "node_id": …, "role": …}}`` as the host last knew them."""
    known: dict[str, dict[str, str]] = json.loads(os.environ.get("RAYCHAOS_NODES", "{}"))
    return known


def node_ip(name: str) -> str:
    return nodes()[name]["ip"]


def node_id() -> str:
    """The Ray node id of the calling process (driver, task or actor)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def node_id_of(name: str) -> str:
    """The current Ray node id of the node called ``name``, read from the GCS by its IP."""
    import ray

    ip = node_ip(name)
    alive = [n for n in ray.nodes() if n["NodeManagerAddress"] == ip and n["Alive"]]
    if not alive:
        raise LookupError(f"no ALIVE Ray node at {ip} ({name})")
    return str(alive[0]["NodeID"])


def drivers_node() -> str:
    """The name of the node hosting the drivers: ``driver``, or the head without one."""
    known = nodes()
    if "driver" in known:
        return "driver"
    return next(name for name, node in known.items() if node.get("role") == "head")


def pin(name: str, soft: bool = False) -> Any:
    """A scheduling strategy that places a task or actor on the node called ``name``."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id_of(name), soft=soft)


def knobs() -> dict[str, str]:
    """The ``RAY_*`` environment in effect for this process (recorded with results)."""
    return {k: v for k, v in os.environ.items() if k.startswith("RAY_")}


SIGNALS = "/raychaos/state/signals"


def wait_signal(name: str, timeout: float) -> float:
    """Block until the host raises signal ``name`` (``Cluster.signal``); return when, wall-clock.

    Raises TimeoutError after ``timeout`` seconds, so a workload never waits forever.
    """
    path = os.path.join(SIGNALS, name)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"host signal {name!r} not raised within {timeout:.0f} s")
        time.sleep(0.05)  # polling period of a bounded wait
    return time.time()


def until(
    fetch: Callable[[], T], done: Callable[[T], bool], timeout: float, period: float = 0.5
) -> T:
    """Call ``fetch`` until ``done(value)`` or ``timeout`` seconds passed; return the last value.

    Bounded polling for the views that lag Ray's own state (State API, resource view, ``ray
    status``): the workload reports what it saw last, and the experiment judges it.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if done(value) or time.monotonic() >= deadline:
            return value
        time.sleep(period)
