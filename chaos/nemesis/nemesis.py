"""The nemesis experiments call: one method per fault, and targets by Ray role.

Each method builds one fault object (see :mod:`chaos.nemesis.process`, ``host``, ``network``,
``resources``) and strikes it through :meth:`~chaos.nemesis.base.Runner.inject`, which proves
the effect and registers the heal. A fault of your own is a :class:`Fault` subclass struck
with ``nemesis.inject(MyFault(...))``; several at once, ``nemesis.inject(Together(a, b))``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import chaos.nemesis.targets as targets
from chaos.errors import ChaosError, CheckFailed
from chaos.nemesis.base import Fault, Runner, Together
from chaos.nemesis.drain import (
    PREEMPTED_MESSAGE,
    PREEMPTION,
    DrainNode,
    PreemptedEnd,
    TerminateNode,
)
from chaos.nemesis.exhaustion import FillDisk, MemoryPressure
from chaos.nemesis.host import KillNode, PauseNode, RestartNode, StopNode
from chaos.nemesis.network import Degrade, Partition
from chaos.nemesis.process import KillAutoscaler, KillGcs, KillRaylet, KillWorker, pids
from chaos.nemesis.rpc import RpcFailures
from chaos.waits import wait_until

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster
    from chaos.spec.rpc_failures import RpcFailure

__all__ = ["Fault", "Nemesis", "Together", "nemesis_for"]


class Nemesis(Runner):
    """The faults of one experiment; :meth:`heal_all` undoes whatever is still active."""

    # -- processes inside a node ------------------------------------------------------------
    def pids(self, node: str, process: str) -> list[int]:
        """PIDs of live processes called exactly ``process`` in ``node`` (a failed ``ps``
        raises: it is not "none")."""
        return pids(self.cluster, node, process)

    def kill_raylet(self, node: str) -> KillRaylet:
        """SIGKILL the raylet of ``node``; the host stays up."""
        return self.inject(KillRaylet(node))

    def kill_gcs(self) -> KillGcs:
        """SIGKILL the GCS server on the head; the head's raylet keeps running."""
        return self.inject(KillGcs())

    def kill_autoscaler(self) -> KillAutoscaler:
        """SIGKILL the head's autoscaler process (an autoscaling cluster's monitor)."""
        if self.cluster.spec.autoscaling is None:
            raise ChaosError("kill_autoscaler needs a cluster with autoscaling")
        return self.inject(KillAutoscaler())

    def kill_worker(self, node: str, pid: int) -> KillWorker:
        """SIGKILL one Ray worker process (the one running a task or actor) by its PID."""
        return self.inject(KillWorker(node, pid))

    def rpc_failures(
        self,
        node: str,
        failures: Sequence[RpcFailure],
        workload: str,
        *,
        timeout: float = 300,
        **kwargs: Any,
    ) -> RpcFailures:
        """Start ``workload(**kwargs)`` as a driver on ``node`` whose own RPCs fail as
        ``failures`` say (Ray's injection); the fault's ``run`` is that driver."""
        return self.inject(RpcFailures(node, tuple(failures), workload, kwargs, timeout))

    # -- whole nodes ------------------------------------------------------------------------
    def kill_node(self, name: str) -> KillNode:
        """SIGKILL every process of the node, then its host: a crashed machine."""
        return self.inject(KillNode(name))

    def drain_node(
        self,
        name: str,
        *,
        reason: str = PREEMPTION,
        message: str = PREEMPTED_MESSAGE,
        deadline_s: float = 10.0,
    ) -> DrainNode:
        """Drain ``name`` through the GCS (``ray drain-node``); verified once it is draining."""
        return self.inject(DrainNode(name, reason, message, deadline_s))

    def end_preempted(self, drain: DrainNode, how: str = "sigkill") -> PreemptedEnd:
        """End a drained node as a cloud ends a preempted one, once the drain's deadline has
        passed (waits for it): ``sigkill`` kills its host, ``sigterm`` its raylet gracefully."""
        wait = drain.deadline - time.time()
        if wait > 0:
            wait_until(lambda: _passed(drain.deadline), wait + 5, "the drain's deadline")
        return self.inject(PreemptedEnd(drain.node, drain=drain, how=how))

    def terminate_node(self, name: str) -> TerminateNode:
        """SIGTERM the node's ``ray start --block`` (a pod's graceful stop); from Ray 2.57.0 it
        drains its node for preemption first."""
        return self.inject(TerminateNode(name))

    def kill_head(self) -> KillNode:
        return self.kill_node(self.cluster.head.name)

    def kill_redis(self) -> KillNode:
        if "redis" not in self.cluster.nodes:
            raise ChaosError("kill_redis needs a cluster with gcs_ft='redis'")
        return self.kill_node("redis")

    def stop_node(self, name: str, grace_s: float = 10) -> StopNode:
        """Stop Ray on the node gracefully (``ray stop``: SIGTERM first); the host stays up."""
        return self.inject(StopNode(name, grace_s))

    def restart_node(self, name: str, timeout: float | None = None) -> RestartNode:
        """(Re)start the node's host; Ray starts again and registers a NEW node id."""
        return self.inject(RestartNode(name, timeout))

    start_node = restart_node

    def restart_head(self, timeout: float | None = None) -> RestartNode:
        """Start the head again: same name, same address, same Redis or RocksDB volume."""
        return self.restart_node(self.cluster.head.name, timeout)

    def pause_node(self, name: str) -> PauseNode:
        """Freeze every process of the node (a hung host); heal unpauses it."""
        return self.inject(PauseNode(name))

    # -- network ----------------------------------------------------------------------------
    def partition(self, groups: Sequence[Iterable[str]]) -> Partition:
        """Cut traffic between every pair of groups, both ways, established connections too."""
        return self.inject(Partition(groups))

    def degrade(
        self, node: str, *, delay_ms: int = 0, jitter_ms: int = 0, loss_pct: float = 0.0
    ) -> Degrade:
        """Delay, jitter and loss on everything ``node`` sends (tc netem)."""
        return self.inject(Degrade(node, delay_ms=delay_ms, jitter_ms=jitter_ms, loss_pct=loss_pct))

    # -- resources --------------------------------------------------------------------------
    def memory_pressure(self, node: str, nbytes: int) -> MemoryPressure:
        """A process in the node that allocates and touches ``nbytes``; heal kills it."""
        return self.inject(MemoryPressure(node, nbytes))

    def fill_disk(self, node: str, path: str, fraction: float) -> FillDisk:
        """Fill the declared tmpfs holding ``path`` up to ``fraction``; heal frees it."""
        return self.inject(FillDisk(node, path, fraction))

    # -- targets by Ray role ----------------------------------------------------------------
    def state(self, kind: str, timeout: float = 60, **filters: str) -> list[dict[str, Any]]:
        """A State API listing (tasks, actors, objects, nodes…) read inside the cluster."""
        return targets.state(self.cluster, kind, timeout, **filters)

    def node_running_task(self, name: str) -> str:
        return targets.node_running_task(self.cluster, name)

    def node_of_actor(self, name: str) -> str:
        return targets.node_of_actor(self.cluster, name)

    def owner_of_object(self, object_id: str) -> str:
        return targets.owner_of_object(self.cluster, object_id)

    def node_with(self, *, resource: str | None = None, label: str | None = None) -> str:
        return targets.node_with(self.cluster, resource=resource, label=label)

    def autoscaled(self, node_type: str) -> str:
        """The oldest node the autoscaler launched of ``node_type`` that is still present."""
        bridge = self.cluster.autoscaler
        if bridge is None:
            raise ChaosError("autoscaled() needs a cluster with autoscaling")
        found = bridge.nodes(node_type)
        if not found:
            raise ChaosError(
                f"no autoscaled {node_type} node is present",
                hint=f"present: {', '.join(bridge.launched.values()) or 'none'}",
            )
        return found[0]


@contextlib.contextmanager
def nemesis_for(cluster: Cluster) -> Iterator[Nemesis]:
    """A nemesis whose faults are all healed on exit, whatever happened inside."""
    nemesis = Nemesis(cluster)
    try:
        yield nemesis
    finally:
        nemesis.heal_all()


def _passed(deadline: float) -> None:
    if time.time() <= deadline:
        raise CheckFailed(f"{deadline - time.time():.1f} s to the deadline")
