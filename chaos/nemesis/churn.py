"""Runs a :class:`~chaos.spec.schedule.Schedule` against a cluster: Ray's nightly killer.

A background thread takes the schedule's strikes in order, each at its offset, and strikes it
through the experiment's :class:`~chaos.nemesis.nemesis.Nemesis` (the same faults, proven and
recorded as any other): a node kill, a raylet kill, a worker-process kill, a preemption (a
drain with a short notice, then the kill once the notice has run out), a pause, a partition
that cuts the node off from every other node (then reconnected and restarted), or RPC
failures (a driver on the drivers' node whose own task pushes fail, by Ray's injection, and
which runs a few retried tasks while the other strikes go on). A node taken out is
replaced after the strike's hold, as a cloud replaces an instance: its container starts again
and joins as a new Ray node. The head is never struck unless the schedule asks for it, and a
strike that would leave no healthy worker is skipped and recorded as skipped.

Which node a strike lands on is resolved when it fires: the ``pick``-th (modulo) of the
role's healthy nodes sorted by name. Every strike, skip and replacement is in the history next
to the schedule itself (``schedule``, ``strike``, ``strike_skipped``, ``replaced``), with its
planned and actual offsets: the schedule is deterministic, Ray's timing and the harness's
boots are not.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError
from chaos.history import Kind, Source
from chaos.nemesis.base import run
from chaos.spec.rpc_failures import RpcFailure
from chaos.spec.schedule import TAKES_NODE, Role, Schedule, Strike, StrikeKind

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from chaos.nemesis.drain import DrainNode
    from chaos.nemesis.nemesis import Nemesis
    from chaos.nemesis.rpc import RpcFailures

#: The notice a preemption gives (the drain's deadline), capped by the strike's hold.
PREEMPT_NOTICE_S = 5.0
#: Ray's worker processes name themselves ``ray::<task or actor>``; so do an idle worker and
#: the node's two agents, which are not fair game: the raylet fate-shares with its dashboard
#: agent (``ray_constants.py``: AGENT_PROCESS_TYPE_*, WORKER_PROCESS_TYPE_IDLE_WORKER).
WORKER_PREFIX = "ray::"
NOT_WORK = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")
#: An ``rpc_failure`` strike's driver: its first two task pushes fail, each losing the request
#: or the reply (even odds: Ray draws which per call), as in CHURN-06.
RPC_PROBE = RpcFailure(
    "CoreWorkerService.grpc_client.PushTask", num_failures=2, request_pct=50, response_pct=50
)
#: How long an ``rpc_failure`` strike's driver may run (tasks retried through node strikes).
RPC_PROBE_S = 300.0


@dataclass(frozen=True)
class Struck:
    """What one strike did: where it landed, or why it was skipped."""

    strike: Strike
    node: str | None
    #: Seconds after the schedule started, as it happened.
    at_s: float
    skipped: str = ""


def _nodes_of(fault: Any) -> set[str]:
    """The nodes a fault names: its ``node``, or a partition's cut-off group."""
    node = getattr(fault, "node", None)
    if node is not None:
        return {node}
    groups = getattr(fault, "groups", None) or ()
    return set(groups[0]) if groups else set()


def choose(
    strike: Strike, *, head: str, workers: Sequence[str], out: Collection[str]
) -> tuple[str | None, str]:
    """The node ``strike`` lands on: the ``pick``-th (modulo) healthy node of its role, sorted
    by name; or None and why not. A strike that takes a node needs two healthy workers (one
    is always left)."""
    if strike.role is Role.HEAD:
        return (head, "") if head not in out else (None, "the head is out already")
    healthy = sorted(n for n in workers if n not in out)
    if strike.kind in TAKES_NODE and len(healthy) < 2:
        return None, f"it would leave no healthy worker ({len(healthy)} healthy)"
    if not healthy:
        return None, "no healthy worker"
    return healthy[strike.pick % len(healthy)], ""


class Churn:
    """The schedule's thread; a context manager that starts it and stops it (``stop`` waits
    for the strike in progress, never interrupts one).

    ``rpc_workload`` (``module:function``) is what an ``rpc_failure`` strike's driver runs,
    called with ``tag`` (``rpc-<strike index>``); its fault, with the driver's run, is kept
    in :attr:`rpc` for the experiment to judge."""

    def __init__(self, nemesis: Nemesis, schedule: Schedule, rpc_workload: str = "") -> None:
        if not rpc_workload and any(s.kind is StrikeKind.RPC_FAILURE for s in schedule.strikes):
            raise ChaosError(
                f"the schedule (seed {schedule.seed}) has rpc_failure strikes but no workload "
                "for their driver",
                hint="Churn(nemesis, schedule, rpc_workload='workloads.churn:rpc_probe')",
            )
        self.nemesis = nemesis
        self.schedule = schedule
        self.rpc_workload = rpc_workload
        #: Each ``rpc_failure`` strike and the fault it started (its driver's run inside).
        self.rpc: list[tuple[Strike, RpcFailures]] = []
        self.struck: list[Struck] = []
        self.started_at = 0.0
        self._out: set[str] = set()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="raychaos-churn", daemon=True)

    def __enter__(self) -> Churn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.started_at = time.time()
        self.nemesis.cluster.history.record(
            Source.NEMESIS, Kind.SCHEDULE, t=self.started_at, **self.schedule.as_dict()
        )
        self._thread.start()

    def join(self, timeout: float) -> list[Struck]:
        """Wait for the schedule to run out (its replacements done); raise what stopped it."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise ChaosError(
                f"the fault schedule (seed {self.schedule.seed}) still runs after {timeout:.0f} s",
                hint="a replacement node may not come back; see the history's strike events",
            )
        if self._error is not None:
            raise self._error
        return self.struck

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    # -- the thread -------------------------------------------------------------------------
    def _main(self) -> None:
        order = itertools.count()
        queue: list[tuple[float, int, str, Any]] = [
            (s.at_s, next(order), "strike", s) for s in self.schedule.strikes
        ]
        heapq.heapify(queue)
        try:
            while queue and not self._stop.is_set():
                at, _, action, item = heapq.heappop(queue)
                if self._stop.wait(max(0.0, self.started_at + at - time.time())):
                    break
                for due, then, what in self._act(action, item):
                    heapq.heappush(queue, (due, next(order), then, what))
        except BaseException as exc:  # noqa: BLE001 — handed to join(), which raises it
            self._error = exc
        finally:
            # A schedule stopped early still replaces the nodes it took out (after an error the
            # cluster's state is unknown: teardown heals what it can).
            if self._error is None:
                for node in sorted(self._out):
                    self._replace(node)

    def _act(self, action: str, item: Any) -> list[tuple[float, str, Any]]:
        if action == "strike":
            return self._strike(item)
        if action == "preempt":
            drain, hold_end = item
            self.nemesis.end_preempted(drain)
            return [(hold_end, "replace", drain.node)]
        self._replace(item)
        return []

    def _strike(self, strike: Strike) -> list[tuple[float, str, Any]]:
        cluster = self.nemesis.cluster
        now = round(time.time() - self.started_at, 3)
        if strike.kind is StrikeKind.RPC_FAILURE:
            self._record(strike, cluster.driver.name, now)
            fault = self.nemesis.rpc_failures(
                cluster.driver.name,
                [RPC_PROBE],
                self.rpc_workload,
                timeout=RPC_PROBE_S,
                tag=f"rpc-{strike.index}",
            )
            self.rpc.append((strike, fault))
            return []
        workers = [n.name for n in cluster.workers()]
        node, why = choose(strike, head=cluster.head.name, workers=workers, out=self._out)
        if node is None:
            return self._skip(strike, now, why)
        if strike.kind is StrikeKind.KILL_WORKER:
            pid = self._busy_worker(node, strike.pick)
            if pid is None:
                return self._skip(strike, now, f"no busy Ray worker process in {node}", node)
        self._record(strike, node, now)
        hold_end = strike.ends_s
        if strike.kind is StrikeKind.KILL_WORKER:
            self.nemesis.kill_worker(node, pid)  # type: ignore[arg-type]  # set just above
            return []
        self._out.add(node)
        if strike.kind is StrikeKind.KILL_NODE:
            self.nemesis.kill_node(node)
        elif strike.kind is StrikeKind.KILL_RAYLET:
            self.nemesis.kill_raylet(node)
        elif strike.kind is StrikeKind.PREEMPT:
            notice = min(PREEMPT_NOTICE_S, strike.hold_s / 2)
            drain: DrainNode = self.nemesis.drain_node(node, deadline_s=notice)
            return [(drain.deadline - self.started_at, "preempt", (drain, hold_end))]
        elif strike.kind is StrikeKind.PAUSE:
            self.nemesis.pause_node(node)
        elif strike.kind is StrikeKind.PARTITION:
            rest = sorted(n for n in cluster.nodes if n != node)
            self.nemesis.partition([[node], rest])
        return [(hold_end, "replace", node)]

    def _replace(self, node: str) -> None:
        """The node comes back: a paused one is thawed; a cut-off one is reconnected and, as
        any other, restarts as a new node (the GCS may have declared it dead meanwhile)."""
        faults = [f for f in self.nemesis.faults if node in _nodes_of(f)]
        if faults and faults[-1].kind == "pause_node":
            self.nemesis.heal(faults[-1])
        else:
            if faults and faults[-1].kind == "partition":
                self.nemesis.heal(faults[-1])
            self.nemesis.restart_node(node)
        self._out.discard(node)
        self.nemesis.cluster.history.record(
            Source.NEMESIS, Kind.REPLACED, target=node, at_s=round(time.time() - self.started_at, 3)
        )

    def _busy_worker(self, node: str, pick: int) -> int | None:
        """A Ray worker process running something in ``node`` (by the schedule's pick)."""
        output = run(self.nemesis.cluster, node, ["ps", "-eo", "pid=,stat=,args="], timeout=15)
        busy = []
        for line in output.splitlines():
            fields = line.split(None, 2)
            if len(fields) < 3 or fields[1].startswith("Z"):
                continue
            title = fields[2]
            if title.startswith(WORKER_PREFIX) and not title.startswith(NOT_WORK):
                busy.append(int(fields[0]))
        return sorted(busy)[pick % len(busy)] if busy else None

    def _record(self, strike: Strike, node: str, now: float) -> None:
        self._note(Struck(strike, node, now))

    def _skip(
        self, strike: Strike, now: float, why: str, node: str | None = None
    ) -> list[tuple[float, str, Any]]:
        self._note(Struck(strike, node, now, skipped=why))
        return []

    def _note(self, struck: Struck) -> None:
        """Keep what a strike did and put it in the history (``strike`` or ``strike_skipped``)."""
        self.struck.append(struck)
        strike = struck.strike
        fields: dict[str, Any] = (
            {"why": struck.skipped} if struck.skipped else {"target": struck.node}
        )
        self.nemesis.cluster.history.record(
            Source.NEMESIS,
            Kind.STRIKE_SKIPPED if struck.skipped else Kind.STRIKE,
            index=strike.index,
            fault=strike.kind.value,
            role=strike.role.value,
            planned_s=strike.at_s,
            at_s=struck.at_s,
            **fields,
        )
