"""The host side of Ray's fake multi-node Docker provider, played by the harness.

Ray's autoscaler runs on the head with ``FakeMultiNodeDockerProvider``, which keeps the nodes
it wants in a directory there and reads their state back from ``status.json``; Ray's own
``docker_monitor.py`` would run ``docker compose`` on the host for it. Here the harness does
that part through the engine, so it works on any engine of a run and the head gets no Docker
socket:

* ``raychaos_agent.autoscale`` on the head reports the provider's wanted workers (only after
  two equal reads of its file);
* every request is checked (a known node type, within its ``max_workers`` and the cluster's)
  and either launched as a node of the cluster (same network, plan, limits, labels, reaper)
  or refused with a recorded event;
* a node the provider no longer wants is removed; the head never is;
* ``status.json`` is rewritten whole and renamed into place (the provider's ``json.load`` never
  reads half a file), with each launched node's real state and address.

A dead autoscaled container is reported as not running and never restarted: its Ray node id
is dead in the GCS, and the provider drops it after its cleanup interval.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from chaos.cluster.readiness import START_EXITED, START_RETRIES
from chaos.errors import ChaosError
from chaos.history import Kind, Source
from chaos.spec.autoscaling import HEAD_ID, STATE_DIR, worker_env
from chaos.spec.topology import NodeSpec

if TYPE_CHECKING:
    from chaos.backends.base import Stream
    from chaos.cluster.cluster import Cluster
    from chaos.history import Event
    from chaos.spec.autoscaling import Autoscaling

#: Seconds between the bridge's rounds (the provider's cleanup interval is ~10 s).
PERIOD_S = 0.5
#: How long the watcher on the head may take to start.
WATCH_START_S = 60.0
SOURCE = "autoscaler"
WANTS = "autoscaler_wants"
STARTED = "autoscaler_bridge_started"
LAUNCHED = "autoscaler_launched"
REMOVED = "autoscaler_removed"
REFUSED = "autoscaler_refused"
BRIDGE_ERROR = "autoscaler_bridge_error"
#: The host state the provider reads as up; anything else is reported as it is.
RUNNING = "running"
WRITE_STATUS = 'printf %s "$2" > "$1/.status.tmp" && mv -f "$1/.status.tmp" "$1/status.json"'


class AutoscalerBridge:
    """Launches and removes the containers Ray's autoscaler asks for; one per cluster."""

    def __init__(self, cluster: Cluster, settings: Autoscaling) -> None:
        self.cluster = cluster
        self.settings = settings
        #: Provider node id → the cluster node launched for it (present ones only).
        self.launched: dict[str, str] = {}
        #: Provider node id → its node type (present ones only).
        self._types: dict[str, str] = {}
        #: Launched nodes whose ``ray start`` has not ended yet → restarts spent on them.
        self._starting: dict[str, int] = {}
        #: Provider node ids refused, so each is refused once.
        self.refused: set[str] = set()
        self._sequence = 0
        self._written: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: Stream | None = None
        self._lock = threading.Lock()

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._watch = self._start_watch()
        self.cluster.history.record(
            SOURCE,
            STARTED,
            max_workers=self.settings.max_workers,
            node_types={k.name: k.max_workers for k in self.settings.node_types},
        )
        self._write_status()
        self._thread = threading.Thread(target=self._loop, name="raychaos-autoscaler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._watch is not None:
            self._watch.stop(grace_s=1)

    def _start_watch(self) -> Stream:
        watch = self.cluster.stream(
            self.cluster.head.name,
            ["python", "-u", "-m", "raychaos_agent.autoscale", STATE_DIR],
            source=SOURCE,
            bound_s=24 * 3600,
        )
        if watch.wait_event({"started"}, WATCH_START_S) is None:
            raise ChaosError(
                f"the autoscaler watch did not start on the head within {WATCH_START_S:.0f} s: "
                f"{watch.tail(8)}"
            )
        return watch

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD_S):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - recorded; the next round tries again
                self.cluster.history.record(SOURCE, BRIDGE_ERROR, error=repr(exc)[:300])

    # -- one round -------------------------------------------------------------------------
    def wanted(self) -> dict[str, str] | None:
        """The provider's latest agreed wish ``{node id: node type}``, None before one."""
        if self._watch is None:
            return None
        reports = [e for e in self._watch.events() if e.kind == WANTS]
        return dict(reports[-1].get("nodes", {})) if reports else None

    def step(self) -> None:
        with self._lock:
            wanted = self.wanted()
            if wanted is not None:
                # Removals first: a wish that swaps a node for another is within the caps.
                for node_id in [i for i in self.launched if i not in wanted]:
                    self._remove(node_id)
                for node_id, node_type in sorted(wanted.items()):
                    if node_id not in self.launched and node_id not in self.refused:
                        self._launch_or_refuse(node_id, node_type)
            self._retry_failed_starts()
            self._write_status()

    def _retry_failed_starts(self) -> None:
        """A launched node whose ``ray start`` died is started again, as a booting node is
        (``readiness``: a starved raylet can abort on a loaded machine), at most
        START_RETRIES times; the autoscaler would otherwise wait for it for ever (v1 gives an
        uninitialized node no start budget)."""
        for name in list(self._starting):
            if name not in self.cluster.nodes:
                del self._starting[name]
                continue
            tail = self.cluster.backend.logs(name, tail=3, since=self.cluster.log_since(name))
            ended = [line for line in tail.splitlines() if line.startswith(START_EXITED)]
            if not ended:
                continue
            if ended[-1].endswith(" 0") or self._starting[name] >= START_RETRIES:
                del self._starting[name]
                continue
            self._starting[name] += 1
            self.cluster.history.record(
                Source.HARNESS,
                Kind.NODE_START_RETRIED,
                node=name,
                why=ended[-1].removeprefix("raychaos: "),
                attempt=self._starting[name],
            )
            self.cluster.restart(name)

    def _launch_or_refuse(self, node_id: str, node_type: str) -> None:
        why = self.refusal(node_id, node_type)
        if why:
            self.refused.add(node_id)
            self.cluster.history.record(
                SOURCE, REFUSED, node_id=node_id, node_type=node_type, reason=why
            )
            return
        kind = self.settings.node_type(node_type)
        if kind is None:  # refusal() refuses an unknown type: a bug if reached
            raise ChaosError(f"launching unknown node type {node_type!r}")
        self._sequence += 1
        spec = NodeSpec(
            name=f"{kind.name}-{self._sequence}",
            num_cpus=kind.num_cpus,
            memory=kind.memory,
            object_store=kind.object_store,
            resources=kind.resources,
            labels=kind.labels,
            extra_args=kind.extra_args,
            env=worker_env(node_id, kind.name),
        )
        (node,) = self.cluster.add_node(spec, wait=False)
        # The provider gives the node its Ray id (RAY_OVERRIDE_NODE_ID_FOR_TESTING).
        node.set_node_id(node_id)
        self.launched[node_id] = node.name
        self._types[node_id] = kind.name
        self._starting[node.name] = 0
        self.cluster.history.record(
            SOURCE,
            LAUNCHED,
            node=node.name,
            node_id=node_id,
            node_type=kind.name,
            workers=dict(self.counts()),
        )

    def refusal(self, node_id: str, node_type: str) -> str:
        """Why a request may not be launched ("" when it may): the harness's own guard."""
        if node_id == HEAD_ID:
            return "the head is never launched by the harness"
        kind = self.settings.node_type(node_type)
        if kind is None:
            known = ", ".join(k.name for k in self.settings.node_types)
            return f"unknown node type {node_type!r} (known: {known})"
        counts = self.counts()
        if counts[node_type] + 1 > kind.max_workers:
            return f"{node_type} would exceed its max_workers {kind.max_workers}"
        if sum(counts.values()) + 1 > self.settings.max_workers:
            return f"the cluster would exceed its max_workers {self.settings.max_workers}"
        return ""

    def nodes(self, node_type: str) -> list[str]:
        """Present nodes launched for ``node_type``, oldest first."""
        return [n for i, n in self.launched.items() if self._types[i] == node_type]

    def counts(self) -> Counter[str]:
        """Launched workers present now, by node type."""
        return Counter(self._types.values())

    def _remove(self, node_id: str) -> None:
        name = self.launched.pop(node_id)
        del self._types[node_id]
        self.cluster.retire(name)
        self.cluster.history.record(
            SOURCE, REMOVED, node=name, node_id=node_id, workers=dict(self.counts())
        )

    # -- status.json -----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """What the provider reads: each node's state and address (the head: always up)."""
        head = self.cluster.head
        out: dict[str, Any] = {HEAD_ID: {"State": RUNNING, "IP": head.ip, "Name": head.name}}
        for node_id, name in self.launched.items():
            node = self.cluster.node(name)
            state = self.cluster.backend.state(name)
            out[node_id] = {"State": state, "IP": node.ip, "Name": name}
        return out

    def _write_status(self) -> None:
        text = json.dumps(self.status(), sort_keys=True)
        if text == self._written:
            return
        result = self.cluster.exec(
            self.cluster.head.name, ["sh", "-c", WRITE_STATUS, "sh", STATE_DIR, text], timeout=30
        )
        if not result.ok:
            raise ChaosError(f"writing the provider's status.json failed: {result.output[-300:]}")
        self._written = text


def launches(cluster: Cluster) -> list[Event]:
    """Every node the harness launched for the autoscaler, in order (``node``, ``node_id``,
    ``node_type``, ``workers`` by type just after)."""
    return cluster.history.events(LAUNCHED)


def removals(cluster: Cluster) -> list[Event]:
    """Every autoscaled node removed because the provider no longer wanted it."""
    return cluster.history.events(REMOVED)


def refusals(cluster: Cluster) -> list[Event]:
    """Every request the harness refused (unknown type, over a cap)."""
    return cluster.history.events(REFUSED)


def wishes(cluster: Cluster) -> list[Event]:
    """Every agreed read of the provider's wanted workers (``nodes``: id → type)."""
    return cluster.history.events(WANTS)
