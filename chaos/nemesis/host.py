"""Faults on a whole node: crash it, stop Ray on it, restart it, freeze it.

The host (a container, a pod) is reached only through ``cluster.backend``; whether a fault
struck is read back from the backend (``exited``, ``paused``) or from the GCS (a new node id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import CheckFailed
from chaos.history import Kind, Source
from chaos.nemesis.base import Fault, run
from chaos.nemesis.process import assert_gone, pids
from chaos.waits import poll

if TYPE_CHECKING:
    from collections.abc import Sequence

    from chaos.cluster.cluster import Cluster


@dataclass(eq=False)
class _NodeDown(Fault):
    """A fault that takes one node's Ray down for good: INV-02 spares its Ray node id."""

    node: str
    node_id: str | None = field(default=None, init=False)
    permanent = True

    @property
    def target(self) -> str:
        return self.node

    @property
    def details(self) -> dict[str, Any]:
        return {"node_id": self.node_id}

    @property
    def takes_down(self) -> Sequence[str]:
        return (self.node,)

    def prepare(self, cluster: Cluster) -> None:
        self.node_id = cluster.node(self.node).node_id


@dataclass(eq=False)
class KillNode(_NodeDown):
    """SIGKILL every process of the node, then its host: a crashed machine."""

    kind = "kill_node"

    def inject(self, cluster: Cluster) -> None:
        cluster.backend.kill(self.node)

    def verify(self, cluster: Cluster) -> None:
        state = cluster.backend.state(self.node)
        if state != "exited":
            raise CheckFailed(f"{self.node}'s host is {state}")


@dataclass(eq=False)
class StopNode(_NodeDown):
    """Stop Ray on the node gracefully (``ray stop``: SIGTERM, then SIGKILL after
    ``grace_s``); the host stays up."""

    grace_s: float = 10
    raylets: list[int] = field(default_factory=list, init=False)
    kind = "stop_node"

    def prepare(self, cluster: Cluster) -> None:
        super().prepare(cluster)
        self.raylets = pids(cluster, self.node, "raylet")

    def inject(self, cluster: Cluster) -> None:
        argv = ["ray", "stop", f"--grace-period={self.grace_s:.0f}"]
        run(cluster, self.node, argv, timeout=self.grace_s + 30)

    def verify(self, cluster: Cluster) -> None:
        for pid in self.raylets:
            assert_gone(cluster, self.node, pid)


@dataclass(eq=False)
class RestartNode(Fault):
    """(Re)start the node's host; Ray starts again and registers a NEW node id (the old one
    is taken down on purpose). Verified once the node is ALIVE in the GCS again."""

    node: str
    #: Seconds to wait for the node to be ALIVE again (default: the cluster's boot timeout).
    timeout: float | None = None
    old_node_id: str | None = field(default=None, init=False)
    kind = "restart_node"
    permanent = True
    verify_timeout_s = 0.0  # verify itself waits (up to ``timeout``)

    @property
    def target(self) -> str:
        return self.node

    @property
    def details(self) -> dict[str, Any]:
        return {"old_node_id": self.old_node_id}

    @property
    def takes_down(self) -> Sequence[str]:
        return (self.node,)

    def prepare(self, cluster: Cluster) -> None:
        self.old_node_id = cluster.node(self.node).node_id

    def inject(self, cluster: Cluster) -> None:
        cluster.restart(self.node)

    def verify(self, cluster: Cluster) -> None:
        node = cluster.node(self.node)
        if node.role != "redis":
            cluster.wait_ready(self.timeout or cluster.spec.boot_timeout_s, nodes=[node])
            if not node.node_id:
                raise CheckFailed(f"{self.node} has no node id after its restart")
        cluster.history.record(
            Source.NEMESIS,
            Kind.NODE_BACK,
            target=self.node,
            old_node_id=self.old_node_id,
            node_id=node.node_id,
        )


@dataclass(eq=False)
class PauseNode(Fault):
    """Freeze every process of the node (a hung host); heal unpauses it."""

    node: str
    kind = "pause_node"

    @property
    def target(self) -> str:
        return self.node

    def inject(self, cluster: Cluster) -> None:
        cluster.backend.pause(self.node)

    def verify(self, cluster: Cluster) -> None:
        state = cluster.backend.state(self.node)
        if state != "paused":
            raise CheckFailed(f"{self.node}'s host is {state}")

    def undo(self, cluster: Cluster) -> None:
        if cluster.backend.state(self.node) == "paused":
            cluster.backend.unpause(self.node)

        def unpaused() -> None:
            if cluster.backend.state(self.node) == "paused":
                raise CheckFailed(f"{self.node}'s host is still paused")

        poll(unpaused, self.verify_timeout_s)
