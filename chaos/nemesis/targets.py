"""Targets by Ray role: which node runs that task, holds that actor, owns that object.

Experiments strike what Ray placed, not a node name guessed in advance; the State API is read
from inside the cluster (the driver node), as a user of Ray would read it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, FaultNotObserved

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster


def state(cluster: Cluster, kind: str, timeout: float = 60, **filters: str) -> list[dict[str, Any]]:
    """A State API listing (tasks, actors, objects, nodes…) read inside the cluster.

    Retried for up to ``timeout`` s: after a head restart the dashboard serving the State API
    comes up some seconds after the GCS.
    """
    argv = [
        "python",
        "-m",
        "raychaos_agent.state",
        kind,
        cluster.dashboard_url,
        *(f"{k}={v}" for k, v in filters.items()),
    ]
    deadline = time.monotonic() + timeout
    while True:
        result = cluster.exec(cluster.driver.name, argv, timeout=60)
        lines = result.output.strip().splitlines()
        if result.exit_code == 0 and lines:
            rows: list[dict[str, Any]] = json.loads(lines[-1])
            return rows
        if time.monotonic() > deadline:
            raise ChaosError(
                f"State API list_{kind} failed for {timeout:.0f} s: exit {result.exit_code}: "
                f"{result.output[-500:]}"
            )
        time.sleep(1.0)  # retry period of a bounded wait (deadline above)


def node_running_task(cluster: Cluster, name: str) -> str:
    """The node (by name) where a RUNNING task called ``name`` runs."""
    rows = [r for r in state(cluster, "tasks", name=name) if r.get("state") == "RUNNING"]
    if not rows:
        raise FaultNotObserved(f"no RUNNING task called {name!r} to target")
    return cluster.node_by_id(str(rows[0]["node_id"])).name


def node_of_actor(cluster: Cluster, name: str) -> str:
    """The node holding the ALIVE actor named (or of class) ``name``."""
    rows = [
        r
        for r in state(cluster, "actors")
        if r.get("state") == "ALIVE" and name in {r.get("name"), r.get("class_name")}
    ]
    if not rows:
        raise FaultNotObserved(f"no ALIVE actor named {name!r} to target")
    return cluster.node_by_id(str(rows[0]["node_id"])).name


def owner_of_object(cluster: Cluster, object_id: str) -> str:
    """The node of the worker that owns object ``object_id``."""
    rows = state(cluster, "objects", object_id=object_id)
    if not rows:
        raise FaultNotObserved(f"object {object_id} not in the State API")
    ip = str(rows[0].get("ip"))
    for node in cluster.ray_nodes():
        if node.ip == ip:
            return node.name
    raise FaultNotObserved(f"object {object_id} is owned at {ip}, which is no node of ours")


def node_with(cluster: Cluster, *, resource: str | None = None, label: str | None = None) -> str:
    """The first node whose spec declares ``resource`` or label ``key=value``."""
    for node in cluster.ray_nodes():
        spec = node.spec
        if spec is None:
            continue
        if resource and resource in spec.resources:
            return node.name
        if label and "=" in label:
            key, _, value = label.partition("=")
            if spec.labels.get(key) == value:
                return node.name
    raise ChaosError(f"no node declares resource={resource!r} label={label!r}")
