"""Readiness: every expected node ALIVE in the GCS, as a probe inside the cluster reports it.

The probe (``raychaos_agent.ready``) is a Ray driver on a node of the cluster; its verdict
arrives on its own stream's channel, not through the evidence log. A node whose ``ray start``
dies (its raylet aborts when the dashboard agent misses a hard-coded 15 s port-file wait on an
overloaded machine) is restarted up to :data:`START_RETRIES` times; the history says so.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from chaos.cluster.stall_stretches import boot_stall, material
from chaos.cluster.stalls import StallSampler
from chaos.errors import ClusterBootTimeout, HostTooBusy
from chaos.history import Kind, Source

if TYPE_CHECKING:
    from chaos.backends.base import Backend, Stream
    from chaos.cluster.node import Node
    from chaos.history import History
    from chaos.spec.plan import ClusterPlan
    from chaos.spec.topology import ClusterSpec

#: How often a node whose `ray start` died is restarted before the boot fails.
START_RETRIES = 2
#: cgroup CPU weights: a booting node outweighs running ones 8:1 (see ``boot_priority``).
DEFAULT_CPU_SHARES = 1024
BOOT_CPU_SHARES = 8192
#: A cluster whose body is being judged outweighs a booting one 2:1 (``judging_priority``):
#: its raylets answer their health checks before another test's imports run. Its nodes are
#: mostly idle, so the weight costs the others only when a judged process is runnable.
JUDGED_CPU_SHARES = 16384
#: The line node-entry.sh prints when `ray start` returns.
START_EXITED = "raychaos: ray start exited with"


class Booting(Protocol):
    """What readiness reads and does on a cluster: the runtime ``Cluster`` is one. A protocol,
    so this module never imports the class that calls it."""

    @property
    def spec(self) -> ClusterSpec: ...
    @property
    def plan(self) -> ClusterPlan: ...
    @property
    def backend(self) -> Backend: ...
    @property
    def history(self) -> History: ...
    @property
    def nodes(self) -> Mapping[str, Node]: ...
    @property
    def head(self) -> Node: ...
    @property
    def driver(self) -> Node: ...
    @property
    def background(self) -> bool: ...

    #: Its running nodes' CPU weight.
    cpu_shares: int

    def stream(
        self,
        node: str,
        argv: Sequence[str],
        *,
        source: str,
        bound_s: float,
        env: Mapping[str, str] | None = None,
    ) -> Stream: ...
    def next_source(self, prefix: str) -> str: ...
    def restart(self, name: str) -> None: ...
    def log_since(self, name: str) -> float | None: ...
    def logs(self, node: str, tail: int = 40) -> str: ...
    def ray_status(self, timeout: float = 30) -> str: ...


def wait_ready(cluster: Booting, timeout: float, nodes: Iterable[Node] | None = None) -> None:
    """Block until every expected node is ALIVE in the GCS; learn their Ray node ids.

    A node that had a Ray node id before (a restart) must come back under a new one.
    """
    expected = [n for n in (nodes or cluster.nodes.values()) if n.expect_join]
    stale = [i for n in expected for i in ([n.node_id] if n.node_id else [])]
    stale += [i for n in expected for i in n.past_node_ids]
    deadline = time.monotonic() + timeout
    argv = probe_argv(cluster, expected, stale)
    host = probe_host(cluster, expected)
    source = cluster.next_source("ready")
    retries: dict[str, int] = {}
    # The boot's nodes' stalls, sampled as a body's are: a boot that times out on a host too
    # busy to boot it is inconclusive, not broken (boot_error).
    sampler = StallSampler(cluster).start()
    began = time.time()
    with boot_priority(cluster, expected), contextlib.ExitStack() as stack:
        stack.callback(sampler.stop)
        probe = cluster.stream(host.name, argv, source=source, bound_s=timeout)
        while True:
            # Read "ended" before the events: the stream delivers every line before it ends,
            # so an ended probe's "ready" is already in its channel.
            ended = not probe.running
            ready = [e for e in probe.events() if e.kind == Kind.READY]
            if ready:
                by_ip = ready[-1].get("nodes", {})
                for node in expected:
                    node.set_node_id(by_ip[node.ip])
                return
            failed = failed_nodes(cluster, expected)
            if failed and all(retries.get(n, 0) < START_RETRIES for n in failed):
                for name, why in failed.items():
                    retries[name] = retries.get(name, 0) + 1
                    cluster.history.record(
                        Source.HARNESS,
                        Kind.NODE_START_RETRIED,
                        node=name,
                        why=why,
                        attempt=retries[name],
                    )
                    cluster.restart(name)
                if host.name in failed:  # the restart killed the probe too
                    probe.stop()
                    remaining = max(1.0, deadline - time.monotonic())
                    probe = cluster.stream(host.name, argv, source=source, bound_s=remaining)
                continue
            if failed or ended or time.monotonic() > deadline:
                probe.stop()
                sampler.stop()
                error = boot_error(cluster, expected, failed, timeout, probe)
                raise too_busy_to_boot(cluster, expected, began, error) or error
            probe.wait_event({Kind.READY, Kind.EXEC_ENDED}, timeout=1.0)


def too_busy_to_boot(
    cluster: Booting, expected: Sequence[Node], began: float, error: ClusterBootTimeout
) -> HostTooBusy | None:
    """``error`` as inconclusive when the booting nodes were stalled past the threshold
    (:func:`chaos.check.stalls.boot_stall`), with the stall named and recorded; else None.
    Only a measured stall makes it: without samples (a remote engine) the boot stays broken."""
    stall = boot_stall(cluster.history.events(), began, time.time(), [n.name for n in expected])
    if stall is None:
        return None
    cluster.history.record(
        Source.HARNESS,
        Kind.MEASUREMENT,
        name="host: worst CPU stall in the boot",
        value=stall.to_json(),
    )
    if not material(stall):
        return None
    cluster.history.record(Source.HARNESS, Kind.INCONCLUSIVE, stall=stall.to_json())
    return HostTooBusy(
        f"the host was too busy to boot: {stall}\n{error.message}",
        stall=str(stall),
        hint="run fewer xdist workers on this machine, or keep it otherwise idle while the "
        "suite runs",
    )


def probe_argv(cluster: Booting, expected: list[Node], stale: list[str]) -> list[str]:
    argv = ["python", "-u", "-m", "raychaos_agent.ready", "--address", cluster.plan.gcs_address]
    argv += ["--expect", ",".join(n.ip for n in expected)]
    return argv + (["--ignore-ids", ",".join(stale)] if stale else [])


def probe_host(cluster: Booting, expected: list[Node]) -> Node:
    """The probe is a driver and needs a raylet of the same cluster beside it: after a head
    restart without persistence only the head's raylet belongs to the new cluster."""
    return cluster.head if cluster.head in expected else cluster.driver


def still_ready(cluster: Booting, timeout: float) -> None:
    """Every node that joined is ALIVE in the GCS under the very id it joined with (a cluster
    booted a while ago, before a test takes it); else :class:`ClusterBootTimeout`."""
    expected = [n for n in cluster.nodes.values() if n.expect_join]
    probe = cluster.stream(
        probe_host(cluster, expected).name,
        probe_argv(cluster, expected, []),
        source=cluster.next_source("ready"),
        bound_s=timeout,
    )
    try:
        probe.wait_event({Kind.READY, Kind.EXEC_ENDED}, timeout=timeout)
        ready = [e for e in probe.events() if e.kind == Kind.READY]
    finally:
        probe.stop()
    by_ip = ready[-1].get("nodes", {}) if ready else {}
    changed = {n.name: by_ip.get(n.ip) for n in expected if by_ip.get(n.ip) != n.node_id}
    if changed:
        raise ClusterBootTimeout(
            f"cluster {cluster.spec.name}: not every node is ALIVE under the id it joined "
            f"with (now: {changed}; probe: {probe.tail(3)})"
        )


@contextlib.contextmanager
def boot_priority(cluster: Booting, nodes: Iterable[Node]) -> Iterator[None]:
    """Give booting nodes a larger CPU share than running ones for the duration.

    A starting raylet aborts when its dashboard agent has not written its port file within
    a hard-coded 15 s; on a small machine running other experiments, the weight is what
    lets the agent's imports finish in time. Only matters under contention.
    """
    # A background boot (the next test's, while experiments run) must not outweigh them.
    names = [] if cluster.background else [n.name for n in nodes]
    for name in names:
        cluster.backend.set_cpu_weight(name, max(BOOT_CPU_SHARES, cluster.cpu_shares))
    try:
        yield
    finally:
        for name in names:  # back to the cluster's weight (a judged one keeps its own)
            cluster.backend.set_cpu_weight(name, cluster.cpu_shares)


def weigh_added(cluster: Booting, name: str) -> None:
    """A node added to a running cluster weighs as its cluster does, and at least as a boot:
    a judged cluster's node launched at the default 1024 starved beside the 16384 of the
    others' (most of AUTOSCALE's inconclusive windows, 6 December 2026)."""
    cluster.backend.set_cpu_weight(name, max(BOOT_CPU_SHARES, cluster.cpu_shares))


def judging_priority(cluster: Booting, judged: bool) -> None:
    """Every node of ``cluster`` at :data:`JUDGED_CPU_SHARES` while its body is judged
    (``judged``), else back at the default; nodes added or restarted meanwhile follow."""
    cluster.cpu_shares = JUDGED_CPU_SHARES if judged else DEFAULT_CPU_SHARES
    for name in list(cluster.nodes):
        cluster.backend.set_cpu_weight(name, cluster.cpu_shares)


def failed_nodes(cluster: Booting, nodes: Iterable[Node]) -> dict[str, str]:
    """Nodes whose host is gone or stopped, or whose ``ray start`` exited non-zero."""
    failed: dict[str, str] = {}
    for node in nodes:
        state = cluster.backend.state(node.name)
        if state not in {"running", "created"}:
            failed[node.name] = f"host {state}"
            continue
        try:
            tail = cluster.backend.logs(node.name, tail=3, since=cluster.log_since(node.name))
        except Exception as exc:  # noqa: BLE001 - a log we cannot read is no verdict
            tail = f"(log unavailable: {exc})"
        for line in tail.splitlines():
            if line.startswith(START_EXITED) and not line.endswith(" 0"):
                failed[node.name] = line.removeprefix("raychaos: ")
    return failed


def boot_error(
    cluster: Booting, expected: list[Node], failed: dict[str, str], timeout: float, probe: Stream
) -> ClusterBootTimeout:
    alive = {
        e.get("node_ip")
        for e in probe.events()
        if e.kind == Kind.NODE_STATE and e.get("state") == "ALIVE"
    }
    lines = [
        f"  {n.name} ({n.ip}): {failed.get(n.name) or ('ALIVE' if n.ip in alive else 'not ALIVE')}"
        for n in expected
    ]
    culprit = next(iter(failed), None) or next(
        (n.name for n in expected if n.ip not in alive), cluster.head.name
    )
    if failed:
        why = f"{', '.join(failed)} failed"
    elif not probe.running:
        why = f"the readiness probe ended (exit {probe.exit_code}) before all were ALIVE"
    else:
        why = f"not all nodes ALIVE after {timeout:.0f} s"
    return ClusterBootTimeout(
        f"cluster {cluster.spec.name} not ready: {why}\n"
        + "\n".join(lines)
        + f"\n--- last log lines of {culprit} ---\n{cluster.logs(culprit, tail=15)}"
        + f"\n--- ray status ---\n{cluster.ray_status(timeout=20)}"
        + f"\n--- readiness probe ---\n{probe.tail(5)}",
        hint="raise boot_timeout_s (--raychaos-boot-timeout) on a loaded machine, or keep "
        "the cluster (--raychaos-keep) and inspect it",
    )
