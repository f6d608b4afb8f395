"""The Docker backend: a :class:`~chaos.spec.ClusterSpec` realised as containers on one network.

One user-defined bridge network per cluster with fixed addresses (a restarted node keeps its
IP), one container per Ray node, a Redis container when GCS fault tolerance uses Redis, no
published ports. Ready means every expected node is ALIVE in the GCS, as the State API reports
it from inside the cluster, not that containers are running.

Use it as a context manager (it tears down if start fails), or through the pytest fixtures.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import secrets
import tarfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from chaos import labels
from chaos.backends.docker.client import call, connect, translated
from chaos.backends.docker.execstream import ExecStream
from chaos.backends.docker.images import ImageBuilder
from chaos.cluster.boot_slots import boot_slot, default_slots
from chaos.cluster.spec import ClusterSpec, NodeSpec, _group_names
from chaos.errors import ClusterBootTimeout, DockerOperationError, WorkloadError
from chaos.observer.history import History
from chaos.resources import agent_path
from chaos.workload.run import WorkloadRun

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container
    from docker.models.networks import Network

Role = Literal["head", "worker", "driver", "redis"]
GCS_PORT = 6379
REDIS_PORT = 6379
DASHBOARD_PORT = 8265
#: How often a node whose `ray start` died is restarted before the boot fails.
START_RETRIES = 2
#: cgroup CPU weights: a booting node outweighs running ones 8:1 (see ``boot_priority``).
DEFAULT_CPU_SHARES = 1024
BOOT_CPU_SHARES = 8192
#: Fixed per-node agent ports. With port 0 (Ray's default) the raylet waits a hard-coded 15 s
#: for each agent's port file and aborts when a loaded machine starts the agents slower; a
#: port passed to the raylet (metrics agent, metrics export, runtime env) skips its wait. The
#: listen port is never passed to the raylet, so that wait stays (see chaos.boot_slots). Each
#: node has its own network namespace: no clashes.
AGENT_PORTS = {
    "--metrics-export-port": 8080,
    "--dashboard-agent-grpc-port": 8081,
    "--runtime-env-agent-port": 8082,
    "--dashboard-agent-listen-port": 52365,
}
RAY_LOGS = "/tmp/ray/session_latest/logs"
#: Where shipped code (agent, workloads) lives in every node; on the image's PYTHONPATH.
LIB_DIR = "/raychaos/lib"
GCS_STORAGE_DIR = "/raychaos/gcs"
#: Host part of fixed addresses inside the cluster's subnet.
_HOSTS = {"head": 10, "driver": 11, "redis": 12}
_FIRST_WORKER_HOST = 20


@dataclass
class Node:
    """One container of the cluster and what Ray calls it."""

    name: str
    role: Role
    ip: str
    image: str
    container: Container
    spec: NodeSpec | None = None
    ray_version: str | None = None
    #: The node's current Ray node id; a restarted raylet registers under a new one.
    node_id: str | None = None
    #: Every Ray node id this container has had, oldest first.
    past_node_ids: list[str] = field(default_factory=list)

    @property
    def expect_join(self) -> bool:
        return self.role != "redis" and (self.spec is None or self.spec.expect_join)

    def set_node_id(self, node_id: str) -> None:
        if node_id != self.node_id:
            if self.node_id:
                self.past_node_ids.append(self.node_id)
            self.node_id = node_id


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str


class Cluster:
    """A running (or about to run) Ray cluster in Docker."""

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        client: docker.DockerClient | None = None,
        identity: labels.RunIdentity | None = None,
        test_id: str = "",
        builder: ImageBuilder | None = None,
        workload_paths: Sequence[Path] = (),
        history: History | None = None,
        tag: str = "c",
        boot_slots: int | None = None,
    ) -> None:
        self.spec = spec.validate()
        self.client = client or connect()
        self.identity = identity or labels.RunIdentity()
        self.test_id = test_id
        self.builder = builder or ImageBuilder(self.client)
        self.workload_paths = tuple(workload_paths)
        self.history = history or History()
        self.tag = tag
        #: Clusters this machine boots at once (see :mod:`chaos.boot_slots`).
        self.boot_slots = boot_slots or default_slots()
        self.nodes: dict[str, Node] = {}
        self.network: Network | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        self.volumes: list[str] = []
        self.redis_password = secrets.token_hex(12) if spec.gcs_ft == "redis" else None
        self.boot_seconds: float | None = None
        self._runs = 0
        self._lock = threading.Lock()
        self._lib_tar: bytes | None = None
        #: Per node, the time from which its container log counts (after a retried start).
        self._log_since: dict[str, float] = {}
        #: Unique per cluster in this run; the ``raychaos.cluster`` label of all its objects.
        self.key = self.identity.name(tag, spec.name)

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
        self._resolve_images()
        self.network = self._create_network()
        self.history.record("harness", "network_created", network=self.network.name)
        if self.spec.gcs_ft == "redis":
            self._start_redis()
        if self.spec.gcs_ft == "rocksdb":
            self._create_volume("gcs")
        plan = self._plan()
        slots = self.builder.settings.cache_dir / "boot-slots"
        with boot_slot(slots, self.boot_slots) as queued:
            self.history.record("harness", "boot_slot", queued_s=round(queued, 2))
            # Head and workers boot together: a worker's `ray start` waits for the GCS itself.
            with ThreadPoolExecutor(max_workers=min(8, len(plan))) as pool:
                for node in pool.map(lambda item: self._create_node(*item), plan):
                    self.nodes[node.name] = node
            self.history.record("harness", "containers_started", count=len(plan))
            self.wait_ready(self.spec.boot_timeout_s)
        self.boot_seconds = time.monotonic() - started - queued
        self.history.record("harness", "cluster_ready", seconds=round(self.boot_seconds, 2))
        return self

    def stop(self) -> None:
        """Remove every container, the network and volumes, each on its own; report leftovers."""
        failures: list[str] = []
        for container in self._containers():
            try:
                container.remove(force=True, v=True)
            except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
                # Gone already, or the daemon is removing it (a concurrent sweep): both fine.
                if "No such container" not in str(exc) and "already in progress" not in str(exc):
                    failures.append(f"container {container.name}: {exc}")
        if self.network is not None:
            try:
                self.network.remove()
            except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
                if "not found" not in str(exc):
                    failures.append(f"network {self.network.name}: {exc}")
        for volume in self.volumes:
            try:
                self.client.volumes.get(volume).remove(force=True)
            except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
                if "no such volume" not in str(exc).lower():
                    failures.append(f"volume {volume}: {exc}")
        if failures:
            raise DockerOperationError(
                "teardown left Docker objects behind: " + "; ".join(failures),
                hint="the next run's sweep removes them, or run `raychaos sweep`",
            )

    # -- nodes ----------------------------------------------------------------------------
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
        for node in self.nodes.values():
            if node.node_id == node_id or node_id in node.past_node_ids:
                return node
        raise WorkloadError(f"no node of cluster {self.spec.name} has Ray node id {node_id}")

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.head.ip}:{DASHBOARD_PORT}"

    def knobs(self, node: str | None = None) -> dict[str, str]:
        """The ``RAY_*`` settings in effect on ``node`` (default: the driver node)."""
        target = self.node(node) if node else self.driver
        env = dict(self.spec.env)
        if target.spec is not None:
            env.update(target.spec.env)
        return {k: v for k, v in env.items() if k.startswith("RAY_")}

    # -- running things inside -------------------------------------------------------------
    def exec(
        self, node: str, argv: Sequence[str], *, timeout: float = 60, env: Mapping[str, str] = {}
    ) -> ExecResult:
        """Run ``argv`` in ``node`` to completion, bounded by ``timeout`` inside the container."""
        container = self.node(node).container
        bounded = ["timeout", "--kill-after=5", f"{timeout:.0f}", *argv]
        result = call(
            f"exec {argv[0]} in {container.name}",
            lambda: container.exec_run(bounded, environment=dict(env)),
        )
        output = result.output if isinstance(result.output, bytes) else b"".join(result.output)
        return ExecResult(int(result.exit_code or 0), output.decode(errors="replace"))

    def stream(
        self,
        node: str,
        argv: Sequence[str],
        *,
        source: str,
        bound_s: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecStream:
        """Start ``argv`` in ``node`` and stream its events into the history."""
        merged = {"RAYCHAOS_NODES": json.dumps(self.node_map()), **(env or {})}
        return ExecStream(
            self.node(node).container,
            argv,
            source=source,
            history=self.history,
            env=merged,
            bound_s=bound_s,
        )

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
        with self._lock:
            self._runs += 1
            source = f"workload-{self._runs}"
        host = node or self.driver.name
        self.history.record("harness", "workload_start", target=target, node=host, run=source)
        env_all = {"RAY_ADDRESS": "auto", **self.knobs(host), **(env or {})}
        stream = self.stream(
            host,
            [python, "-u", "-m", "raychaos_agent.run", target, payload],
            source=source,
            bound_s=timeout,
            env=env_all,
        )
        return WorkloadRun(target, stream, self.history, timeout)

    def add_node(self, node: NodeSpec, *, wait: bool = True) -> list[Node]:
        """Boot a new worker group into the running cluster (e.g. "once a node that fits joins")."""
        node.validate(f"add_node({node.name})")
        names = _group_names(node)
        taken = [n for n in names if n in self.nodes]
        if taken:
            raise WorkloadError(f"add_node: names already in use: {', '.join(taken)}")
        used = {
            int(ipaddress.ip_address(n.ip)) - int(self._subnet().network_address)
            for n in self.nodes.values()
        }
        free = (h for h in range(_FIRST_WORKER_HOST, 250) if h not in used)
        added = [self._create_node(name, "worker", node, self._ip(next(free))) for name in names]
        for item in added:
            self.nodes[item.name] = item
        self.history.record("harness", "node_added", nodes=names)
        if wait and node.expect_join:
            self.wait_ready(self.spec.boot_timeout_s, nodes=added)
        return added

    def restart_container(self, name: str) -> None:
        """Restart a node's container: its entry runs `ray start` again (a new Ray node id)."""
        call(f"restart {name}", lambda: self.node(name).container.restart(timeout=5))
        # Only what the new incarnation logs counts from now on: the old one logged before the
        # restart, and the new `ray start` needs over a second of imports to log anything. A
        # float, not whole seconds rounded up, which hid a `ray start` failing within ~1 s.
        self._log_since[name] = time.time()

    def _subnet(self) -> ipaddress.IPv4Network:
        assert self.subnet is not None, "the cluster has not started"
        return self.subnet

    def signal(self, name: str, node: str | None = None) -> None:
        """Raise signal ``name`` for workloads waiting in ``wait_signal`` (default: driver node)."""
        target = node or self.driver.name
        path = f"/raychaos/state/signals/{name}"
        result = self.exec(target, ["sh", "-c", f"mkdir -p /raychaos/state/signals && : > {path}"])
        if result.exit_code != 0:
            raise WorkloadError(f"could not raise signal {name} on {target}: {result.output}")
        self.history.record("harness", "signal", name=name, node=target)

    def node_map(self) -> dict[str, dict[str, str]]:
        return {
            n.name: {"ip": n.ip, "node_id": n.node_id or "", "role": n.role}
            for n in self.nodes.values()
        }

    def ray_status(self, timeout: float = 30) -> str:
        """``ray status`` as the head sees it (or why it could not be had)."""
        try:
            result = self.exec(self.head.name, ["ray", "status"], timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
            return f"(ray status unavailable: {exc})"
        return result.output

    def logs(self, node: str, tail: int = 40) -> str:
        """The container's own log (``ray start`` output) plus the tails of Ray's session logs."""
        target = self.node(node)
        parts: list[str] = []
        try:
            parts.append(bytes(target.container.logs(tail=tail)).decode(errors="replace"))
        except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
            parts.append(f"(container log unavailable: {exc})")
        if target.role != "redis":
            try:
                result = self.exec(
                    node,
                    [
                        "sh",
                        "-c",
                        f"tail -n {tail} {RAY_LOGS}/raylet.out {RAY_LOGS}/gcs_server.out"
                        " 2>/dev/null",
                    ],
                    timeout=15,
                )
                parts.append(result.output)
            except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
                parts.append(f"(Ray logs unavailable: {exc})")
        return "\n".join(parts)

    # -- readiness ------------------------------------------------------------------------
    def wait_ready(self, timeout: float, nodes: Iterable[Node] | None = None) -> None:
        """Block until every expected node is ALIVE in the GCS; learn their Ray node ids.

        A node that had a Ray node id before (a restart) must come back under a new one.
        """
        expected = [n for n in (nodes or self.nodes.values()) if n.expect_join]
        stale = [i for n in expected for i in ([n.node_id] if n.node_id else [])]
        stale += [i for n in expected for i in n.past_node_ids]
        deadline = time.monotonic() + timeout
        with self._lock:
            self._runs += 1
            source = f"ready-{self._runs}"
        argv = [
            "python",
            "-u",
            "-m",
            "raychaos_agent.ready",
            "--address",
            f"{self.head_ip}:{GCS_PORT}",
            "--expect",
            ",".join(n.ip for n in expected),
        ]
        if stale:
            argv += ["--ignore-ids", ",".join(stale)]
        # The probe is a driver and needs a raylet of the same cluster beside it: after a head
        # restart without persistence only the head's raylet belongs to the new cluster.
        host = self.head if self.head in expected else self.driver
        retries: dict[str, int] = {}
        with self.boot_priority(expected):
            probe = self.stream(host.name, argv, source=source, bound_s=timeout)
            while True:
                # Read "ended" before the events: the stream records every line before it
                # ends, so an ended probe's "ready" is already in the history.
                ended = not probe.running
                ready = self.history.events("ready", source=source)
                if ready:
                    by_ip = ready[-1].get("nodes", {})
                    for node in expected:
                        node.set_node_id(by_ip[node.ip])
                    return
                failed = self._failed_nodes(expected)
                if failed and all(retries.get(n, 0) < START_RETRIES for n in failed):
                    # A `ray start` that dies while the machine is overloaded (its raylet
                    # aborts when the dashboard agent misses a 15 s port-file wait) gets
                    # another chance; the history says so.
                    for name, why in failed.items():
                        retries[name] = retries.get(name, 0) + 1
                        self.history.record(
                            "harness",
                            "node_start_retried",
                            node=name,
                            why=why,
                            attempt=retries[name],
                        )
                        self.restart_container(name)
                    if host.name in failed:  # the restart killed the probe too
                        probe.stop()
                        remaining = max(1.0, deadline - time.monotonic())
                        probe = self.stream(host.name, argv, source=source, bound_s=remaining)
                    continue
                if failed or ended or time.monotonic() > deadline:
                    probe.stop()
                    raise self._boot_error(expected, failed, timeout, probe, source)
                self.history.await_event(
                    lambda e: e.source == source and e.kind in {"ready", "exec_ended"}, timeout=1.0
                )

    @contextlib.contextmanager
    def boot_priority(self, nodes: Iterable[Node]) -> Iterator[None]:
        """Give booting nodes a larger CPU share than running ones for the duration.

        A starting raylet aborts when its dashboard agent has not written its port file within
        a hard-coded 15 s; on a small machine running other experiments, the weight is what
        lets the agent's imports finish in time. Only matters under contention.
        """
        nodes = list(nodes)
        self._set_cpu_shares(nodes, BOOT_CPU_SHARES)
        try:
            yield
        finally:
            self._set_cpu_shares(nodes, DEFAULT_CPU_SHARES)

    def _set_cpu_shares(self, nodes: Iterable[Node], shares: int) -> None:
        for node in nodes:
            # A node that is gone or being removed needs no share; never fail a boot for it.
            with contextlib.suppress(Exception):
                node.container.update(cpu_shares=shares)

    def _failed_nodes(self, nodes: Iterable[Node]) -> dict[str, str]:
        failed: dict[str, str] = {}
        for node in nodes:
            try:
                node.container.reload()
            except Exception as exc:  # noqa: BLE001 - keep going: teardown and diagnostics must not raise
                failed[node.name] = f"container gone ({exc})"
                continue
            if node.container.status not in {"running", "created"}:
                failed[node.name] = f"container {node.container.status}"
                continue
            since = self._log_since.get(node.name)
            logs = (
                node.container.logs(tail=3, since=since) if since else node.container.logs(tail=3)
            )
            tail = bytes(logs).decode(errors="replace")
            for line in tail.splitlines():
                if line.startswith("raychaos: ray start exited with") and not line.endswith(" 0"):
                    failed[node.name] = line.removeprefix("raychaos: ")
        return failed

    def _boot_error(
        self,
        expected: list[Node],
        failed: dict[str, str],
        timeout: float,
        probe: ExecStream,
        source: str,
    ) -> ClusterBootTimeout:
        alive = {
            ip
            for e in self.history.events("node_state", source=source)
            if e.get("state") == "ALIVE"
            for ip in [e.get("node_ip")]
        }
        lines = []
        for node in expected:
            state = failed.get(node.name) or ("ALIVE" if node.ip in alive else "not ALIVE")
            lines.append(f"  {node.name} ({node.ip}): {state}")
        culprit = next(iter(failed), None) or next(
            (n.name for n in expected if n.ip not in alive), self.head.name
        )
        return ClusterBootTimeout(
            f"cluster {self.spec.name} not ready: "
            + (
                f"{', '.join(failed)} failed"
                if failed
                else (
                    f"the readiness probe ended (exit {probe.exit_code}) before all were ALIVE"
                    if not probe.running
                    else f"not all nodes ALIVE after {timeout:.0f} s"
                )
            )
            + "\n"
            + "\n".join(lines)
            + f"\n--- last log lines of {culprit} ---\n{self.logs(culprit, tail=15)}"
            + f"\n--- ray status ---\n{self.ray_status(timeout=20)}"
            + f"\n--- readiness probe ---\n{probe.tail(5)}",
            hint="raise boot_timeout_s (--raychaos-boot-timeout) on a loaded machine, or keep "
            "the cluster (--raychaos-keep) and inspect it with `docker logs`",
        )

    # -- construction ---------------------------------------------------------------------
    def _resolve_images(self) -> None:
        """Build every image the spec needs before any container starts (first use only)."""
        for group in (self.spec.head, *self.spec.workers):
            self._image_for(group)

    def _create_network(self) -> Network:
        name = self.key
        owner = self._labels()
        last_error: Exception | None = None
        for _ in range(5):
            # Ask the daemon for a free subnet, then pin it, so nodes can have fixed addresses.
            probe = call(
                "create network",
                lambda: self.client.networks.create(
                    name + "-probe", driver="bridge", internal=True, labels=owner
                ),
            )
            try:
                config = probe.attrs["IPAM"]["Config"][0]
                subnet = ipaddress.ip_network(config["Subnet"])
            finally:
                call("remove network", probe.remove)
            if not isinstance(subnet, ipaddress.IPv4Network):
                raise DockerOperationError(f"daemon gave an IPv6 subnet {subnet}")
            import docker.types

            ipam = docker.types.IPAMConfig(
                pool_configs=[
                    docker.types.IPAMPool(
                        subnet=str(subnet), gateway=str(subnet.network_address + 1)
                    )
                ]
            )
            try:
                with translated("create network"):
                    network = self.client.networks.create(
                        name,
                        driver="bridge",
                        internal=True,
                        ipam=ipam,
                        labels=owner,
                        check_duplicate=True,
                    )
            except DockerOperationError as exc:
                last_error = exc  # another run took the subnet in between: ask again
                continue
            self.subnet = subnet
            return network
        raise DockerOperationError(f"could not create network {name}: {last_error}")

    def _create_volume(self, purpose: str) -> str:
        name = self.identity.name(self.tag, self.spec.name, purpose)
        call("create volume", lambda: self.client.volumes.create(name, labels=self._labels()))
        self.volumes.append(name)
        return name

    def _labels(self, **extra: str) -> dict[str, str]:
        return self.identity.labels(test=self.test_id[:200], cluster=self.key, **extra)

    def _ip(self, host: int) -> str:
        return str(self._subnet().network_address + host)

    def _plan(self) -> list[tuple[str, Role, NodeSpec, str]]:
        spec = self.spec
        plan: list[tuple[str, Role, NodeSpec, str]] = [
            (spec.head.name, "head", spec.head, self._ip(_HOSTS["head"]))
        ]
        host = _FIRST_WORKER_HOST
        for group in spec.workers:
            for name in _group_names(group):
                plan.append((name, "worker", group, self._ip(host)))
                host += 1
        if spec.driver:
            driver = NodeSpec(name="driver", num_cpus=0, memory="1g", object_store="100m")
            plan.append(("driver", "driver", driver, self._ip(_HOSTS["driver"])))
        return plan

    def _image_for(self, node_spec: NodeSpec) -> tuple[str, str]:
        version = node_spec.ray_version or self.spec.ray_version
        image = node_spec.image or self.spec.image
        if image is None:
            image = self.builder.ensure(version, self.spec.python)
        return version, image

    def ray_start_argv(self, name: str, role: Role, node: NodeSpec, ip: str) -> list[str]:
        """The ``ray start`` command line of one node (no ``--block``: see node-entry.sh)."""
        argv = ["ray", "start", f"--node-ip-address={ip}", "--disable-usage-stats"]
        if role == "head":
            argv += [
                "--head",
                f"--port={GCS_PORT}",
                "--dashboard-host=0.0.0.0",  # cluster network only, no published port
                f"--dashboard-port={DASHBOARD_PORT}",
                "--include-dashboard=true",
            ]
            if self.redis_password:
                argv.append(f"--redis-password={self.redis_password}")
        else:
            argv.append(f"--address={node.head_address or f'{self.head_ip}:{GCS_PORT}'}")
        argv += [
            f"--num-cpus={_num(node.num_cpus)}",
            f"--num-gpus={_num(node.num_gpus)}",
            f"--object-store-memory={node.object_store_bytes}",
        ]
        if node.ray_memory is not None:
            from chaos.cluster.spec import parse_size

            argv.append(f"--memory={parse_size(node.ray_memory, 'ray_memory')}")
        if node.resources:
            argv.append(f"--resources={json.dumps(dict(node.resources))}")
        node_labels = {"raychaos/node": name, **dict(node.labels)}
        argv.append("--labels=" + ",".join(f"{k}={v}" for k, v in node_labels.items()))
        given = {arg.split("=", 1)[0] for arg in node.extra_args}
        argv += [f"{flag}={port}" for flag, port in AGENT_PORTS.items() if flag not in given]
        argv += list(node.extra_args)
        return argv

    @property
    def head_ip(self) -> str:
        return self._ip(_HOSTS["head"])

    def _node_env(self, role: Role, node: NodeSpec) -> dict[str, str]:
        env = {"RAY_USAGE_STATS_ENABLED": "0", "RAYCHAOS_NODE": node.name}
        env.update(self.spec.env)
        env.update(node.env)
        if role == "head" and self.spec.gcs_ft == "redis":
            env["RAY_REDIS_ADDRESS"] = f"{self._ip(_HOSTS['redis'])}:{REDIS_PORT}"
        if role == "head" and self.spec.gcs_ft == "rocksdb":
            env.setdefault("RAY_gcs_storage", "rocksdb")
            env.setdefault("RAY_gcs_storage_path", GCS_STORAGE_DIR)
        return env

    def _create_node(self, name: str, role: Role, node: NodeSpec, ip: str) -> Node:
        version, image = self._image_for(node)
        volumes = {}
        if role == "head" and self.spec.gcs_ft == "rocksdb":
            volumes[self.volumes[0]] = {"bind": GCS_STORAGE_DIR, "mode": "rw"}
        container = self._run_container(
            name,
            role,
            image=image,
            ip=ip,
            command=self.ray_start_argv(name, role, node, ip),
            entrypoint=["/usr/local/bin/raychaos-node-entry"],
            environment=self._node_env(role, node),
            host_config={
                "shm_size": node.shm_bytes,
                "mem_limit": node.memory_bytes,
                "memswap_limit": node.memory_bytes,
                "nano_cpus": int(node.cpu_limit * 1e9) if node.cpu_limit else None,
                "binds": volumes or None,
                "tmpfs": dict(node.tmpfs) or None,
            },
            ship_lib=True,
        )
        return Node(
            name=name,
            role=role,
            ip=ip,
            image=image,
            container=container,
            spec=node,
            ray_version=version,
        )

    def _start_redis(self) -> None:
        base = (
            self.builder.ensure_base(self.spec.python) if not self.spec.image else self.spec.image
        )
        ip = self._ip(_HOSTS["redis"])
        assert self.redis_password is not None
        container = self._run_container(
            "redis",
            "redis",
            image=base,
            ip=ip,
            command=[
                "redis-server",
                "--port",
                str(REDIS_PORT),
                "--bind",
                "0.0.0.0",  # noqa: S104 - the cluster network only; no port is published
                "--protected-mode",
                "no",
                "--requirepass",
                self.redis_password,
                "--appendonly",
                "yes",
                "--dir",
                "/var/lib/redis",
                "--save",
                "",
            ],
            entrypoint=None,
            environment={},
            host_config={"mem_limit": 256 * 1024**2},
            ship_lib=False,
        )
        self.nodes["redis"] = Node(
            name="redis", role="redis", ip=ip, image=base, container=container
        )

    def _run_container(
        self,
        name: str,
        role: Role,
        *,
        image: str,
        ip: str,
        command: list[str],
        entrypoint: list[str] | None,
        environment: dict[str, str],
        host_config: dict[str, Any],
        ship_lib: bool,
    ) -> Container:
        assert self.network is not None
        api = self.client.api
        full_name = self.identity.name(self.tag, self.spec.name, name)
        with translated(f"create container {full_name}"):
            created = api.create_container(
                image,
                command=command,
                entrypoint=entrypoint,
                name=full_name,
                hostname=name,
                environment=environment,
                labels=self._labels(role=role, node=name),
                host_config=api.create_host_config(
                    init=True,
                    cap_add=["NET_ADMIN"],
                    **{k: v for k, v in host_config.items() if v is not None},
                ),
                networking_config=api.create_networking_config(
                    {
                        str(self.network.name): api.create_endpoint_config(
                            ipv4_address=ip, aliases=[name]
                        )
                    }  # type: ignore[arg-type]
                ),
                detach=True,
            )
            container = self.client.containers.get(created["Id"])
            if ship_lib:
                container.put_archive("/", self._lib_archive())
            container.start()
        return container

    def _lib_archive(self) -> bytes:
        """The agent and the workload packages, as a tar rooted at ``/`` (built once)."""
        if self._lib_tar is None:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as tar:
                sources = [agent_path(), *self.workload_paths]
                for source in sources:
                    if not source.is_dir():
                        raise WorkloadError(
                            f"workload package {source} does not exist",
                            hint="set raychaos_workloads (ini) to directories of Python packages",
                        )
                    tar.add(
                        str(source),
                        arcname=f"{LIB_DIR.lstrip('/')}/{source.name}",
                        filter=_skip_caches,
                    )
            self._lib_tar = buffer.getvalue()
        return self._lib_tar

    def _containers(self) -> list[Container]:
        """Every container of this cluster: the ones we hold, and any found by its label."""
        found = {n.container.id: n.container for n in self.nodes.values()}
        with contextlib.suppress(Exception):  # removal of the ones we hold goes ahead anyway
            for container in self.client.containers.list(
                all=True, ignore_removed=True, filters={"label": f"{labels.CLUSTER}={self.key}"}
            ):
                found.setdefault(container.id, container)
        return list(found.values())


def _skip_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if "__pycache__" in info.name or info.name.endswith(".pyc"):
        return None
    info.uid = info.gid = 0
    return info


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
