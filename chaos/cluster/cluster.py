"""A Ray cluster realised by a backend: boot it, run things inside it, tear it down.

The spec is validated and turned into a frozen :class:`~chaos.spec.plan.ClusterPlan` once;
the backend (Docker by default) creates what the plan says. Ready means every expected node is
ALIVE in the GCS, as the State API reports it from inside the cluster, not that hosts run.

Use it as a context manager (it tears down if start fails), or through the pytest fixtures.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chaos.backends import default_backend
from chaos.cluster import boot, diagnostics, readiness
from chaos.cluster.autoscaler import AutoscalerBridge
from chaos.cluster.boot_slots import default_slots
from chaos.cluster.node import Node
from chaos.errors import ChaosError, DockerOperationError, WorkloadError
from chaos.history import History, Kind, Source
from chaos.spec.plan import ClusterPlan, plan_group
from chaos.spec.topology import ClusterSpec, NodeSpec, group_names, releases_available
from chaos.workload.run import WorkloadRun

if TYPE_CHECKING:
    from chaos.backends.base import Backend, ExecResult, Stream


#: Where ``Cluster.signal`` raises signals and ``raychaos_agent.wait_signal`` looks for them.
SIGNALS_DIR = "/raychaos/state/signals"
#: A signal is a file of that directory: its name can never leave it or reach a shell.
SIGNAL_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


class Cluster:
    """A running (or about to run) Ray cluster."""

    def __init__(
        self,
        spec: ClusterSpec,
        backend: Backend | None = None,
        *,
        history: History | None = None,
        boot_slots: int | None = None,
    ) -> None:
        self.spec = releases_available(spec.validate())  # before any Docker object exists
        self.backend = backend or default_backend(spec.name)
        self.history = history or History()
        #: Clusters this machine boots at once (see :mod:`chaos.cluster.boot_slots`).
        self.boot_slots = boot_slots or default_slots()
        self.nodes: dict[str, Node] = {}
        #: Nodes removed for good (by the autoscaler), kept to name their Ray node ids.
        self.retired: dict[str, Node] = {}
        #: The host side of Ray's autoscaler, on an autoscaling cluster.
        self.autoscaler: AutoscalerBridge | None = None
        self._plan: ClusterPlan | None = None
        self.boot_seconds: float | None = None
        #: Booted while other clusters run experiments (:mod:`chaos.plugin.boot_ahead`): its nodes
        #: boot at the default CPU weight, not over the experiments' (``boot_priority``).
        self.background = False
        self.cpu_shares = readiness.DEFAULT_CPU_SHARES  # running nodes' (judging_priority)
        self._sources = 0
        self._lock = threading.Lock()
        #: Per node, the time from which its host's log counts (after a restart).
        self._log_since: dict[str, float] = {}

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException as exc:
            try:
                self.stop()
            except DockerOperationError as teardown:
                exc.add_note(f"(and teardown failed: {teardown})")
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        try:
            self.stop()
        except DockerOperationError as teardown:
            if exc is None:
                raise
            # Never let a teardown problem hide the error that ended the block.
            exc.add_note(f"(and teardown failed: {teardown})")

    def start(self) -> Cluster:
        started = time.monotonic()
        self._plan = boot.prepare(self.spec, self.backend)
        nodes = [Node(p) for p in self._plan.nodes]
        self.nodes = {n.name: n for n in nodes}
        self.boot_seconds = boot.start(
            self._plan,
            nodes,
            self.backend,
            self.history,
            slots=self.boot_slots,
            wait_ready=lambda: self.wait_ready(self.spec.boot_timeout_s),
        )
        self.history.record(
            Source.HARNESS,
            Kind.CLUSTER_READY,
            seconds=round(self.boot_seconds, 2),
            with_images_s=round(time.monotonic() - started, 2),
        )
        if self.spec.autoscaling is not None:
            self.autoscaler = AutoscalerBridge(self, self.spec.autoscaling)
            self.autoscaler.start()
        return self

    def stop(self) -> None:
        """Remove every host (concurrently), the network and volumes; report leftovers."""
        if self.autoscaler is not None:
            self.autoscaler.stop()  # first: nothing is launched while the cluster goes
        failures = self.backend.teardown()
        if failures:
            key = getattr(self.backend, "key", None)
            now = f"raychaos sweep --cluster {key}" if key else "raychaos sweep"
            raise DockerOperationError(
                "teardown left objects behind: " + "; ".join(failures),
                hint="raychaos's reaper removes them when this pytest process exits, else the "
                f"next run's sweep does; to remove them now: {now}",
            )

    # -- nodes ----------------------------------------------------------------------------
    @property
    def plan(self) -> ClusterPlan:
        if self._plan is None:
            raise ChaosError("the cluster has not started", hint="use it as `with Cluster(spec)`")
        return self._plan

    @property
    def head(self) -> Node:
        return self.nodes[self.spec.head.name]

    @property
    def driver(self) -> Node:
        """The node that hosts workload drivers: the driver node, or the head without one."""
        return self.nodes.get("driver", self.head)

    def node(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise WorkloadError(
                f"no node called {name!r} in cluster {self.spec.name}",
                hint=f"nodes: {', '.join(self.nodes)}",
            ) from None

    def ray_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role != "redis"]

    def workers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == "worker"]

    def node_by_id(self, node_id: str) -> Node:
        for node in [*self.nodes.values(), *self.retired.values()]:
            if node.node_id == node_id or node_id in node.past_node_ids:
                return node
        raise WorkloadError(f"no node of cluster {self.spec.name} has Ray node id {node_id}")

    @property
    def dashboard_url(self) -> str:
        return self.plan.dashboard_url

    def knobs(self, node: str | None = None) -> dict[str, str]:
        """The ``RAY_*`` settings in effect on ``node`` (default: the driver node)."""
        target = self.node(node) if node else self.driver
        env = dict(self.spec.env)
        if target.spec is not None:
            env.update(target.spec.env)
        return {k: v for k, v in env.items() if k.startswith("RAY_")}

    def node_map(self) -> dict[str, dict[str, str]]:
        return {
            n.name: {"ip": n.ip, "node_id": n.node_id or "", "role": n.role}
            for n in self.nodes.values()
        }

    # -- running things inside -------------------------------------------------------------
    def exec(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` in ``node`` to completion, bounded by ``timeout`` inside the node."""
        self.node(node)  # a clear error for an unknown name
        return self.backend.exec(node, argv, timeout=timeout, env=env or {})

    def stream(
        self,
        node: str,
        argv: Sequence[str],
        *,
        source: str,
        bound_s: float,
        env: Mapping[str, str] | None = None,
    ) -> Stream:
        """Start ``argv`` in ``node``; its events reach its own channel and the history."""
        self.node(node)
        merged = {"RAYCHAOS_NODES": json.dumps(self.node_map()), **(env or {})}
        return self.backend.stream(
            node, argv, source=source, sink=self.history.append, env=merged, bound_s=bound_s
        )

    def next_source(self, prefix: str) -> str:
        """A fresh stream name (``workload-3``, ``ready-4``): the source of its events."""
        with self._lock:
            self._sources += 1
            return f"{prefix}-{self._sources}"

    def run(
        self,
        target: str,
        /,
        *,
        node: str | None = None,
        timeout: float = 300,
        env: Mapping[str, str] | None = None,
        python: str = "python",
        **kwargs: Any,
    ) -> WorkloadRun:
        """Start workload ``module:function(**kwargs)`` on ``node`` (default: the driver node).

        ``python`` picks the interpreter (another venv in the node, for a skewed driver).
        """
        if ":" not in target:
            raise WorkloadError(
                f"workload target {target!r} is not MODULE:FUNCTION",
                hint="e.g. cluster.run('workloads.tasks:retry_until_success', attempts=3)",
            )
        try:
            payload = json.dumps(kwargs)
        except TypeError as exc:
            raise WorkloadError(f"workload arguments must be JSON-able: {exc}") from exc
        source = self.next_source("workload")
        host = node or self.driver.name
        self.history.record(
            Source.HARNESS, Kind.WORKLOAD_START, target=target, node=host, run=source, kwargs=kwargs
        )
        stream = self.stream(
            host,
            [python, "-u", "-m", "raychaos_agent.run", target, payload],
            source=source,
            bound_s=timeout,
            env={"RAY_ADDRESS": "auto", **self.knobs(host), **(env or {})},
        )
        return WorkloadRun(target, stream, self.history, timeout)

    def signal(self, name: str, node: str | None = None) -> None:
        """Raise signal ``name`` for workloads waiting in ``wait_signal`` (default: driver node)."""
        if not isinstance(name, str) or not SIGNAL_NAME.fullmatch(name):
            raise WorkloadError(
                f"signal name: expected a file name of letters, digits, '.', '_' or '-' (not "
                f"starting with '.'), got {name!r}",
                hint="the workload waits for it with raychaos_agent.wait_signal(name, timeout)",
            )
        target = node or self.driver.name
        # The name is an argument of the script, never part of it.
        script = 'mkdir -p "$1" && : > "$1/$2"'
        result = self.exec(target, ["sh", "-c", script, "sh", SIGNALS_DIR, name])
        if result.exit_code != 0:
            raise WorkloadError(f"could not raise signal {name} on {target}: {result.output}")
        self.history.record(Source.HARNESS, Kind.SIGNAL, name=name, node=target)

    # -- changing the cluster --------------------------------------------------------------
    def add_node(self, node: NodeSpec, *, wait: bool = True) -> list[Node]:
        """Boot a new worker group into the running cluster (e.g. "once a node that fits joins")."""
        node.validate(f"add_node({node.name})")
        _names_free(node, self.nodes)
        plans = plan_group(
            self.spec,
            node,
            subnet=self.plan.subnet,
            # Never a retired node's address: its lane and its GCS entry stay its own.
            taken={n.ip for n in [*self.nodes.values(), *self.retired.values()]},
            image_for=self._image_for,
        )
        added = [Node(p) for p in plans]
        for item in added:
            self.backend.start_node(item.plan)
            readiness.weigh_added(self, item.name)
            self.nodes[item.name] = item
        self.history.record(Source.HARNESS, Kind.NODE_ADDED, nodes=[n.name for n in added])
        if wait and node.expect_join:
            self.wait_ready(self.spec.boot_timeout_s, nodes=added)
        return added

    def retire(self, name: str) -> None:
        """Remove a node's host for good (the autoscaler terminated it); its Ray node id stays
        known (``node_by_id``) but it is no longer one of ``nodes``."""
        node = self.node(name)
        self.backend.remove_node(name)
        self.retired[name] = self.nodes.pop(name)
        self.history.record(Source.HARNESS, Kind.NODE_REMOVED, node=name, node_id=node.node_id)

    def restart(self, name: str) -> None:
        """Restart a node's host: its entry runs `ray start` again (a new Ray node id)."""
        self.backend.restart(self.node(name).name)
        # Only what the new incarnation logs counts from now on: the old one logged before the
        # restart, and the new `ray start` needs over a second of imports to log anything. A
        # float, not whole seconds rounded up, which hid a `ray start` failing within ~1 s.
        self._log_since[name] = time.time()

    def log_since(self, name: str) -> float | None:
        return self._log_since.get(name)

    def wait_ready(self, timeout: float, nodes: Iterable[Node] | None = None) -> None:
        """Block until every expected node is ALIVE in the GCS (see :mod:`readiness`)."""
        readiness.wait_ready(self, timeout, nodes)

    def check_still_ready(self, timeout: float) -> None:
        """Every node is still ALIVE under the Ray node id it joined with (see
        :mod:`readiness`); raises :class:`ClusterBootTimeout` otherwise."""
        readiness.still_ready(self, timeout)

    # -- diagnostics -----------------------------------------------------------------------
    def ray_status(self, timeout: float = 30) -> str:
        """``ray status`` as the head sees it (or why it could not be had)."""
        return diagnostics.ray_status(self, timeout)

    def logs(self, node: str, tail: int = 40) -> str:
        """The host's own log (``ray start`` output) plus the tails of Ray's session logs."""
        return diagnostics.logs(self, node, tail)

    def _image_for(self, node: NodeSpec) -> tuple[str, str]:
        return boot.image_for(self.spec, self.backend, node)


def _names_free(node: NodeSpec, nodes: Mapping[str, Node]) -> None:
    """Raise unless every name of ``node``'s group is free among ``nodes``."""
    taken = [n for n in group_names(node) if n in nodes]
    if taken:
        raise WorkloadError(f"add_node: names already in use: {', '.join(taken)}")
