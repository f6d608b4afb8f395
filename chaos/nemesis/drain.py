"""Drains: what a cloud's spot preemption (or an autoscaler's idle termination) asks of Ray.

A drain request goes to the GCS, which asks the node's raylet; a PREEMPTION drain cannot be
refused, an IDLE_TERMINATION one is refused while the node is busy (``autoscaler.proto``).
Ray never enforces the deadline: "it's the caller's responsibility" to end the node
(``ray drain-node --help``), which :class:`PreemptedEnd` does, as a cloud would, once the deadline
has passed. The node's death then reads as a preemption (``AUTOSCALER_DRAIN_PREEMPTED``, the
drain's message) only if the GCS notices it after the deadline: before it, the node died
unexpectedly (``GcsNodeManager::InferDeathInfo``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, CheckFailed
from chaos.nemesis.base import Fault, run
from chaos.nemesis.host import KillNode
from chaos.nemesis.process import assert_gone, only_pid, pids, ray_start_pids

if TYPE_CHECKING:
    from collections.abc import Sequence

    from chaos.cluster.cluster import Cluster

PREEMPTION = "DRAIN_NODE_REASON_PREEMPTION"
#: The drain message ``ray start --block`` sends the GCS on SIGTERM (``ray/_private/node.py``:
#: ``Node._drain_node_before_shutdown``, Ray 2.57.0 and later).
SIGTERM_MESSAGE = "Node received SIGTERM; draining before shutdown."
#: Ray's knob: how long that drain may wait for the node to go idle (default 30 s).
GRACEFUL_DRAIN_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
IDLE_TERMINATION = "DRAIN_NODE_REASON_IDLE_TERMINATION"
#: What a preemption says unless an experiment says otherwise (it is the death's message).
PREEMPTED_MESSAGE = "raychaos: spot instance preempted"


@dataclass(frozen=True)
class DrainReply:
    """The GCS's answer to a drain request (a rejection is an answer, not an error)."""

    accepted: bool
    rejection: str
    #: The deadline sent, in ms since the epoch (0: none).
    deadline_ms: int
    #: When the request was sent (wall clock).
    at: float


def _agent(cluster: Cluster, args: Sequence[str]) -> Any:
    argv = ["python", "-m", "raychaos_agent.drain", cluster.plan.gcs_address, *args]
    output = run(cluster, cluster.head.name, argv, timeout=60)
    lines = [line for line in output.splitlines() if line.startswith(("{", "["))]
    if not lines:
        raise ChaosError(f"raychaos_agent.drain {args[0]} printed no answer: {output[-300:]}")
    return json.loads(lines[-1])


def request_drain(
    cluster: Cluster, node: str, *, reason: str, message: str, deadline_s: float
) -> DrainReply:
    """Ask the GCS to drain ``node`` (from the head), ``deadline_s`` from now (0: none)."""
    node_id = cluster.node(node).node_id
    if not node_id:
        raise ChaosError(f"{node} has no Ray node id to drain")
    at = time.time()
    answer = _agent(cluster, ["request", node_id, reason, message, str(deadline_s)])
    return DrainReply(
        bool(answer["accepted"]), str(answer["rejection"]), int(answer["deadline_ms"]), at
    )


def draining(cluster: Cluster) -> dict[str, float]:
    """``{node id: deadline (s since the epoch, 0: none)}`` of the nodes the GCS has draining."""
    return {k: v / 1000 for k, v in _agent(cluster, ["list"]).items()}


@dataclass(eq=False)
class DrainNode(Fault):
    """Drain ``node`` with ``reason`` and ``deadline_s``; verified once the GCS lists it as
    draining. A drain cannot be taken back: its heal undoes nothing."""

    node: str
    reason: str = PREEMPTION
    message: str = PREEMPTED_MESSAGE
    deadline_s: float = 10.0
    reply: DrainReply | None = field(default=None, init=False)
    node_id: str | None = field(default=None, init=False)
    kind = "drain_node"
    permanent = True

    @property
    def target(self) -> str:
        return self.node

    @property
    def details(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, "deadline_s": self.deadline_s}

    @property
    def deadline(self) -> float:
        """The deadline sent (wall clock)."""
        if self.reply is None:
            raise ChaosError("the drain was not requested yet")
        return self.reply.deadline_ms / 1000

    def prepare(self, cluster: Cluster) -> None:
        self.node_id = cluster.node(self.node).node_id

    def inject(self, cluster: Cluster) -> None:
        self.reply = request_drain(
            cluster, self.node, reason=self.reason, message=self.message, deadline_s=self.deadline_s
        )
        if not self.reply.accepted:
            raise CheckFailed(f"the GCS refused to drain {self.node}: {self.reply.rejection!r}")

    def verify(self, cluster: Cluster) -> None:
        """Draining, or already gone: a node with nothing to do shuts its raylet down as soon
        as it drains (``LocalResourceManager``: "The node is drained, continue to shut down
        raylet"), and leaves the draining list with it."""
        if self.node_id in draining(cluster):
            return
        if pids(cluster, self.node, "raylet"):
            raise CheckFailed(f"{self.node} ({str(self.node_id)[:8]}) is not draining")


#: How a preempted node ends at its deadline: its host killed (a hard reclaim), or its raylet
#: sent SIGTERM (a cloud's shutdown signal: the raylet reports its own death as a preemption).
ENDS = ("sigkill", "sigterm")


@dataclass(eq=False)
class PreemptedEnd(KillNode):
    """The preemption's end once the drain's deadline has passed: ``sigkill`` kills the node's
    host, ``sigterm`` sends SIGTERM to its raylet (which, draining for preemption past its
    deadline, unregisters with that death reason: ``raylet/main.cc``).

    Refuses to strike before the deadline: the death would then read as unexpected."""

    drain: DrainNode | None = None
    how: str = "sigkill"
    raylet: int = field(default=0, init=False)
    kind = "preempted_end"

    def prepare(self, cluster: Cluster) -> None:
        super().prepare(cluster)
        if self.how not in ENDS:
            raise ChaosError(f"a preemption ends by one of {ENDS}, not {self.how!r}")
        if self.drain is None or self.drain.reply is None:
            raise ChaosError(f"{self.node}: a preemption's end needs the accepted drain first")
        early = self.drain.deadline - time.time()
        if early > 0:
            raise ChaosError(
                f"{self.node}: the drain's deadline is {early:.1f} s away",
                hint="wait for the deadline (Nemesis.end_preempted does): before it, no preemption",
            )
        if self.how == "sigterm":
            self.raylet = only_pid(cluster, self.node, "raylet")

    def inject(self, cluster: Cluster) -> None:
        if self.how == "sigkill":
            super().inject(cluster)
        else:
            run(cluster, self.node, ["kill", "-TERM", str(self.raylet)], timeout=15)

    def verify(self, cluster: Cluster) -> None:
        if self.how == "sigkill":
            super().verify(cluster)
        else:
            assert_gone(cluster, self.node, self.raylet)

    @property
    def details(self) -> dict[str, Any]:
        deadline = self.drain.deadline if self.drain and self.drain.reply else None
        return {"node_id": self.node_id, "drain_deadline": deadline, "how": self.how}


@dataclass(eq=False)
class TerminateNode(KillNode):
    """SIGTERM the node's ``ray start --block`` process, as Kubernetes stops a pod whose PID 1
    it is. From Ray 2.57.0 that process drains its own node for preemption and waits (up to
    ``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S``) for the raylet to leave once idle, then ends
    what is left; before, it ends everything at once. The host stays up.

    Verified once the signal is seen: the process is gone, or its node is draining."""

    pid: int = field(default=0, init=False)
    #: Whether the GCS was seen listing the node as draining (else the process was gone),
    #: and the deadline it listed (s since the epoch: when the handler ends what is left).
    seen_draining: bool = field(default=False, init=False)
    drain_deadline: float | None = field(default=None, init=False)
    kind = "terminate_node"

    def prepare(self, cluster: Cluster) -> None:
        super().prepare(cluster)
        if "--block" not in cluster.node(self.node).plan.argv:
            raise ChaosError(
                f"{self.node}'s ray start does not block, so no process is left to signal",
                hint="give the node extra_args=['--block'] (as a Kubernetes pod's PID 1 runs)",
            )
        found = ray_start_pids(cluster, self.node)
        if len(found) != 1:
            raise ChaosError(f"expected one blocking ray start in {self.node}: PIDs {found}")
        self.pid = found[0]

    def inject(self, cluster: Cluster) -> None:
        run(cluster, self.node, ["kill", "-TERM", str(self.pid)], timeout=15)

    def verify(self, cluster: Cluster) -> None:
        listed = draining(cluster)
        if self.node_id in listed:
            self.seen_draining = True
            self.drain_deadline = listed[self.node_id] or None
            return
        assert_gone(cluster, self.node, self.pid)

    @property
    def details(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "pid": self.pid,
            "seen_draining": self.seen_draining,
            "drain_deadline": self.drain_deadline,
        }
