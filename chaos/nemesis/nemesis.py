"""Faults that prove they happened and always heal (Jepsen's nemesis, as context managers).

Every fault registers its heal with the :class:`Nemesis` *before* it strikes, records
``inject`` / ``verified`` / ``heal`` events in the history, and verifies its effect (container
exited, PID gone, traffic blocked both ways). A fault whose effect cannot be seen raises
:class:`~chaos.errors.FaultNotObserved`: the experiment is inconclusive, never passed.

Processes are killed by PID inside their own container, never by name across the host.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, FaultNotObserved, HealError
from chaos.waits import poll

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster, Node

#: Our own iptables chain: heal flushes only rules we created (Pumba's rule).
CHAIN = "RAYCHAOS"
VERIFY_TIMEOUT_S = 20.0


@dataclass
class Fault:
    """One injected fault: what, where, and how to undo it."""

    kind: str
    target: str
    nemesis: Nemesis
    details: dict[str, Any] = field(default_factory=dict)
    undo: Callable[[], None] | None = None
    healed: bool = False
    injected_at: float = 0.0
    #: Faults such as a SIGKILL have nothing to undo; the node stays down until restarted.
    permanent: bool = False

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()

    def heal(self) -> None:
        if self.healed:
            return
        self.healed = True
        if self.undo is not None:
            try:
                self.undo()
            except ChaosError:
                raise
            except Exception as exc:
                raise HealError(f"healing {self.kind} on {self.target} failed: {exc}") from exc
        self.nemesis.cluster.history.record(
            "nemesis", "heal", fault=self.kind, target=self.target, permanent=self.permanent
        )


class Nemesis:
    """The faults of one experiment; :meth:`heal_all` undoes whatever is still active."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.faults: list[Fault] = []
        #: Ray node ids this experiment took down on purpose (INV-02 spares them).
        self.killed_node_ids: set[str] = set()

    # -- bookkeeping ----------------------------------------------------------------------
    def _strike(
        self,
        kind: str,
        target: str,
        inject: Callable[[], None],
        verify: Callable[[], None],
        undo: Callable[[], None] | None = None,
        *,
        permanent: bool = False,
        **details: Any,
    ) -> Fault:
        fault = Fault(kind, target, self, dict(details), undo=undo, permanent=permanent)
        self.faults.append(fault)  # registered before it strikes: teardown will heal it
        history = self.cluster.history
        fault.injected_at = history.record(
            "nemesis", "inject", fault=kind, target=target, **details
        ).t
        inject()
        try:
            verify()
        except AssertionError as exc:
            history.record("nemesis", "not_observed", fault=kind, target=target, error=str(exc))
            raise FaultNotObserved(
                f"{kind} on {target} was injected but not observed: {exc}",
                hint="the experiment is inconclusive; see the history for what was seen",
            ) from None
        history.record("nemesis", "verified", fault=kind, target=target)
        return fault

    def heal_all(self) -> None:
        """Heal every active fault, newest first; report all failures together."""
        errors = []
        for fault in reversed(self.faults):
            try:
                fault.heal()
            except ChaosError as exc:
                errors.append(str(exc))
        if errors:
            raise HealError("; ".join(errors), hint="the cluster is in an unknown state")

    def _mark_killed(self, node: Node) -> None:
        if node.node_id:
            self.killed_node_ids.add(node.node_id)

    # -- processes inside a node ------------------------------------------------------------
    def pids(self, node: str, process: str) -> list[int]:
        """PIDs of live processes called exactly ``process`` in ``node`` (zombies excluded:
        a killed process lingers as one until PID 1 reaps it)."""
        result = self.cluster.exec(node, ["ps", "-eo", "pid=,stat=,comm="], timeout=15)
        pids = []
        for line in result.output.splitlines():
            fields = line.split(None, 2)
            if len(fields) == 3 and fields[2] == process and not fields[1].startswith("Z"):
                pids.append(int(fields[0]))
        return pids

    def _kill_pid(self, node: str, pid: int, kind: str, label: str, **details: Any) -> Fault:
        def inject() -> None:
            self.cluster.exec(node, ["kill", "-9", str(pid)], timeout=15)

        def verify() -> None:
            poll(lambda: self._assert_gone(node, pid), VERIFY_TIMEOUT_S)

        return self._strike(
            kind, f"{node}:{label}", inject, verify, permanent=True, pid=pid, **details
        )

    def _assert_gone(self, node: str, pid: int) -> None:
        # `kill -0` fails for a reaped PID; a zombie still shows in /proc as state Z.
        state = self.cluster.exec(node, ["sh", "-c", f"cat /proc/{pid}/stat 2>/dev/null"])
        fields = state.output.rsplit(")", 1)[-1].split()
        assert not fields or fields[0] in {"Z", "X"}, f"PID {pid} still running in {node}"

    def kill_raylet(self, node: str) -> Fault:
        """SIGKILL the raylet of ``node``; the container (the host) stays up."""
        pids = self.pids(node, "raylet")
        if len(pids) != 1:
            raise FaultNotObserved(f"expected one raylet in {node}, found PIDs {pids}")
        self._mark_killed(self.cluster.node(node))
        return self._kill_pid(node, pids[0], "kill_raylet", "raylet")

    def kill_gcs(self) -> Fault:
        """SIGKILL the GCS server on the head; the head's raylet keeps running."""
        head = self.cluster.head.name
        pids = self.pids(head, "gcs_server")
        if len(pids) != 1:
            raise FaultNotObserved(f"expected one gcs_server on {head}, found PIDs {pids}")
        return self._kill_pid(head, pids[0], "kill_gcs", "gcs_server")

    def kill_worker(self, node: str, pid: int) -> Fault:
        """SIGKILL one Ray worker process (the one running a task or actor) by its PID."""
        return self._kill_pid(node, pid, "kill_worker", f"pid {pid}")

    # -- whole nodes ----------------------------------------------------------------------
    def kill_node(self, name: str) -> Fault:
        """SIGKILL the node's container: every Ray process on it dies at once."""
        node = self.cluster.node(name)
        self._mark_killed(node)

        def verify() -> None:
            def exited() -> None:
                node.container.reload()
                assert node.container.status == "exited", f"container is {node.container.status}"

            poll(exited, VERIFY_TIMEOUT_S)

        def inject() -> None:
            import docker.errors

            # Processes first, inside the still-networked container, then the container: the
            # kernel closes their sockets while the veth is up, so peers get the FIN/RST a
            # crashed process's kernel sends. A bare `docker kill` races network teardown under
            # load (CI: a driver's NodeDiedError came 13 s after DEAD instead of at once).
            with contextlib.suppress(Exception):  # paused or already gone: the kill below does it
                node.container.exec_run(["kill", "-9", "-1"])
            with contextlib.suppress(docker.errors.APIError):  # already exited by itself
                node.container.kill("SIGKILL")

        return self._strike("kill_node", name, inject, verify, permanent=True, node_id=node.node_id)

    def kill_head(self) -> Fault:
        return self.kill_node(self.cluster.head.name)

    def kill_redis(self) -> Fault:
        if "redis" not in self.cluster.nodes:
            raise ChaosError("kill_redis needs a cluster with gcs_ft='redis'")
        return self.kill_node("redis")

    def stop_node(self, name: str, grace_s: float = 10) -> Fault:
        """Stop Ray on the node gracefully (``ray stop``: SIGTERM first); the host stays up."""
        node = self.cluster.node(name)
        raylets = self.pids(name, "raylet")
        self._mark_killed(node)

        def inject() -> None:
            self.cluster.exec(
                name, ["ray", "stop", f"--grace-period={grace_s:.0f}"], timeout=grace_s + 30
            )

        def all_gone() -> None:
            for pid in raylets:
                self._assert_gone(name, pid)

        def verify() -> None:
            poll(all_gone, VERIFY_TIMEOUT_S)

        return self._strike("stop_node", name, inject, verify, permanent=True, node_id=node.node_id)

    def restart_node(self, name: str, timeout: float | None = None) -> Fault:
        """(Re)start the node's container; Ray starts again and registers a NEW node id."""
        node = self.cluster.node(name)
        old_id = node.node_id
        bound = timeout or self.cluster.spec.boot_timeout_s

        if old_id:
            self.killed_node_ids.add(old_id)  # the old incarnation dies by our hand

        def inject() -> None:
            self.cluster.restart_container(name)

        def verify() -> None:
            if node.role == "redis":
                return
            self.cluster.wait_ready(bound, nodes=[node])
            assert node.node_id, f"{name} has no node id after restart"

        fault = self._strike(
            "restart_node", name, inject, verify, permanent=True, old_node_id=old_id
        )
        self.cluster.history.record(
            "nemesis", "node_back", target=name, old_node_id=old_id, node_id=node.node_id
        )
        return fault

    start_node = restart_node

    def restart_head(self, timeout: float | None = None) -> Fault:
        """Start the head again: same name, same address, same Redis or RocksDB volume."""
        return self.restart_node(self.cluster.head.name, timeout)

    def pause_node(self, name: str) -> Fault:
        """Freeze every process of the node (a hung host); heal unpauses it."""
        node = self.cluster.node(name)

        def verify() -> None:
            node.container.reload()
            assert node.container.status == "paused", f"container is {node.container.status}"

        def undo() -> None:
            node.container.reload()
            if node.container.status == "paused":
                node.container.unpause()

        return self._strike("pause_node", name, node.container.pause, verify, undo)

    # -- network ----------------------------------------------------------------------------
    def partition(self, groups: Sequence[Iterable[str]]) -> Fault:
        """Cut traffic between every pair of groups, both ways, established connections too.

        Nodes not named in any group keep talking to everyone. Heal removes only our rules.
        """
        named = [[self.cluster.node(n) for n in group] for group in groups]
        if len(named) < 2:
            raise ChaosError("partition needs at least two groups of nodes")
        rules: dict[str, list[str]] = {}
        for index, group in enumerate(named):
            others = [n.ip for j, g in enumerate(named) if j != index for n in g]
            for node in group:
                rules[node.name] = others

        def inject() -> None:
            for name, ips in rules.items():
                script = [
                    f"iptables -N {CHAIN} 2>/dev/null || iptables -F {CHAIN}",
                    f"iptables -C INPUT -j {CHAIN} 2>/dev/null || iptables -I INPUT -j {CHAIN}",
                    f"iptables -C OUTPUT -j {CHAIN} 2>/dev/null || iptables -I OUTPUT -j {CHAIN}",
                ]
                for ip in ips:
                    script += [
                        f"iptables -A {CHAIN} -s {ip} -j DROP",
                        f"iptables -A {CHAIN} -d {ip} -j DROP",
                    ]
                self._sh(name, " && ".join(script))

        def undo() -> None:
            for name in rules:
                with contextlib.suppress(ChaosError):
                    self._sh(name, f"iptables -F {CHAIN} 2>/dev/null; true")
            self._check_pairs(named, blocked=False)

        def verify() -> None:
            self._check_pairs(named, blocked=True)

        return self._strike(
            "partition", " | ".join(",".join(g) for g in map(list, groups)), inject, verify, undo
        )

    def _sh(self, node: str, script: str) -> str:
        result = self.cluster.exec(node, ["sh", "-c", script], timeout=30)
        if result.exit_code != 0:
            raise ChaosError(f"in {node}: `{script}` exited {result.exit_code}: {result.output}")
        return result.output

    def _check_pairs(self, groups: list[list[Node]], *, blocked: bool) -> None:
        """TCP connect from a node of each group to a listening port of a node of every other."""
        for index, group in enumerate(groups):
            for other in groups[index + 1 :]:
                for src, dst in ((group[0], other[0]), (other[0], group[0])):
                    reachable = self._connects(src, dst)
                    if reachable is None:
                        continue  # dst has no listening port (not running Ray): nothing to test
                    assert reachable is not blocked, (
                        f"{src.name} → {dst.name}: traffic "
                        f"{'still flows' if blocked else 'still blocked after heal'}"
                    )

    def _connects(self, src: Node, dst: Node) -> bool | None:
        ports = self.cluster.exec(dst.name, ["ss", "-ltnH"], timeout=15).output.split("\n")
        candidates = [
            line.split()[3].rsplit(":", 1)[1]
            for line in ports
            if len(line.split()) > 3 and not line.split()[3].startswith(("127.", "[::1]"))
        ]
        if not candidates:
            return None
        probe = (
            "import socket,sys\n"
            f"s=socket.socket(); s.settimeout(2)\n"
            f"sys.exit(0 if s.connect_ex(({dst.ip!r}, {int(candidates[0])})) == 0 else 1)"
        )
        result = self.cluster.exec(src.name, ["python3", "-c", probe], timeout=15)
        return result.exit_code == 0

    def degrade(
        self, node: str, *, delay_ms: int = 0, jitter_ms: int = 0, loss_pct: float = 0.0
    ) -> Fault:
        """Delay, jitter and loss on everything ``node`` sends (tc netem).

        Kernels without netem (``CONFIG_NET_SCH_NETEM``) still get loss, through an iptables
        ``statistic`` rule in our chain; delay there is refused with a clear error.
        """
        if delay_ms <= 0 and loss_pct <= 0:
            raise ChaosError("degrade needs delay_ms > 0 or loss_pct > 0")
        netem = ["netem"]
        if delay_ms:
            netem += ["delay", f"{delay_ms}ms"] + ([f"{jitter_ms}ms"] if jitter_ms else [])
        if loss_pct:
            netem += ["loss", f"{loss_pct}%"]
        rule = " ".join(netem)
        probe = self.cluster.exec(
            node,
            ["sh", "-c", f"tc qdisc replace dev eth0 root {rule} && tc qdisc del dev eth0 root"],
        )
        has_netem = probe.exit_code == 0
        if not has_netem and delay_ms:
            raise ChaosError(
                f"degrade(delay_ms={delay_ms}) needs tc netem, which this kernel lacks "
                f"({probe.output.strip()})",
                hint="use loss_pct only (iptables), or a Docker host whose kernel has "
                "CONFIG_NET_SCH_NETEM",
            )
        drop = f"-o eth0 -m statistic --mode random --probability {loss_pct / 100:.4f} -j DROP"

        def inject() -> None:
            if has_netem:
                self._sh(node, f"tc qdisc replace dev eth0 root {rule}")
            else:
                self._sh(
                    node,
                    f"(iptables -N {CHAIN} 2>/dev/null || true) && "
                    f"(iptables -C OUTPUT -j {CHAIN} 2>/dev/null || "
                    f"iptables -I OUTPUT -j {CHAIN}) && iptables -A {CHAIN} {drop}",
                )

        def verify() -> None:
            if has_netem:
                shown = self._sh(node, "tc qdisc show dev eth0")
                assert "netem" in shown, f"no netem qdisc on {node}: {shown!r}"
            else:
                shown = self._sh(node, f"iptables -S {CHAIN}")
                assert "statistic" in shown, f"no loss rule on {node}: {shown!r}"

        def undo() -> None:
            if has_netem:
                self._sh(node, "tc qdisc del dev eth0 root 2>/dev/null; true")
            else:
                self._sh(node, f"iptables -D {CHAIN} {drop} 2>/dev/null; true")

        return self._strike(
            "degrade", node, inject, verify, undo, rule=rule if has_netem else f"iptables {drop}"
        )

    # -- resources ------------------------------------------------------------------------
    def memory_pressure(self, node: str, nbytes: int) -> Fault:
        """A process in the node that allocates and touches ``nbytes``; heal kills it."""
        # It reports its PID as an agent event, so heal can kill it by PID in the container.
        script = (
            "import json,os,time\n"
            f"b=bytearray({int(nbytes)})\n"
            "for i in range(0, len(b), 4096): b[i]=1\n"
            "print('@@raychaos '+json.dumps({'event':'allocated','pid':os.getpid()}), flush=True)\n"
            "time.sleep(3600)\n"
        )
        holder = self.cluster.stream(
            node, ["python3", "-c", script], source=f"pressure-{node}", bound_s=3600
        )

        def verify() -> None:
            def resident() -> None:
                assert holder.running, f"allocator ended: {holder.tail(3)}"
                assert holder.pid is not None, "allocator has not reported yet"
                status = self.cluster.exec(node, ["cat", f"/proc/{holder.pid}/status"]).output
                rss = next(
                    (
                        int(line.split()[1]) * 1024
                        for line in status.splitlines()
                        if line.startswith("VmRSS:")
                    ),
                    0,
                )
                assert rss >= 0.9 * nbytes, f"resident {rss} of {nbytes} bytes"

            poll(resident, 60)

        return self._strike(
            "memory_pressure", node, lambda: None, verify, holder.stop, bytes=nbytes
        )

    def fill_disk(self, node: str, path: str, fraction: float) -> Fault:
        """Fill the filesystem holding ``path`` up to ``fraction`` of its size; heal frees it."""
        if not 0 < fraction < 1:
            raise ChaosError(f"fill_disk fraction: expected 0 < f < 1, got {fraction}")
        filler = f"{path.rstrip('/')}/.raychaos-fill"

        def sizes() -> tuple[int, int]:
            out = self._sh(node, f"df -B1 --output=size,used {shlex.quote(path)} | tail -1")
            size, used = (int(x) for x in out.split())
            return size, used

        def inject() -> None:
            size, used = sizes()
            need = int(size * fraction) - used
            if need > 0:
                self._sh(node, f"fallocate -l {need} {shlex.quote(filler)}")

        def verify() -> None:
            size, used = sizes()
            assert used >= size * fraction * 0.99, f"{path} is {used / size:.0%} full"

        def undo() -> None:
            self._sh(node, f"rm -f {shlex.quote(filler)}")

        return self._strike("fill_disk", node, inject, verify, undo, path=path, fraction=fraction)

    # -- targets by Ray role ---------------------------------------------------------------
    def state(self, kind: str, timeout: float = 60, **filters: str) -> list[dict[str, Any]]:
        """A State API listing (tasks, actors, objects, …) read inside the cluster.

        Retried for up to ``timeout`` s: after a head restart the dashboard serving the State
        API comes up some seconds after the GCS.
        """
        argv = [
            "python",
            "-m",
            "raychaos_agent.state",
            kind,
            self.cluster.dashboard_url,
            *(f"{k}={v}" for k, v in filters.items()),
        ]
        last = ""
        deadline = time.monotonic() + timeout
        while True:
            result = self.cluster.exec(self.cluster.driver.name, argv, timeout=60)
            if result.exit_code == 0:
                rows: list[dict[str, Any]] = json.loads(result.output.strip().splitlines()[-1])
                return rows
            last = result.output[-500:]
            if time.monotonic() > deadline:
                raise ChaosError(f"State API list_{kind} failed for {timeout:.0f} s: {last}")
            time.sleep(1.0)  # retry period of a bounded wait (deadline above)

    def node_running_task(self, name: str) -> str:
        """The node (by name) where a RUNNING task called ``name`` runs."""
        rows = [r for r in self.state("tasks", name=name) if r.get("state") == "RUNNING"]
        if not rows:
            raise FaultNotObserved(f"no RUNNING task called {name!r} to target")
        return self.cluster.node_by_id(str(rows[0]["node_id"])).name

    def node_of_actor(self, name: str) -> str:
        """The node holding the ALIVE actor named (or of class) ``name``."""
        rows = [
            r
            for r in self.state("actors")
            if r.get("state") == "ALIVE" and name in {r.get("name"), r.get("class_name")}
        ]
        if not rows:
            raise FaultNotObserved(f"no ALIVE actor named {name!r} to target")
        return self.cluster.node_by_id(str(rows[0]["node_id"])).name

    def owner_of_object(self, object_id: str) -> str:
        """The node of the worker that owns object ``object_id``."""
        rows = self.state("objects", object_id=object_id)
        if not rows:
            raise FaultNotObserved(f"object {object_id} not in the State API")
        ip = str(rows[0].get("ip"))
        return next(n.name for n in self.cluster.ray_nodes() if n.ip == ip)

    def node_with(self, *, resource: str | None = None, label: str | None = None) -> str:
        """The first node whose spec declares ``resource`` or label ``key=value``."""
        for node in self.cluster.ray_nodes():
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


@contextlib.contextmanager
def nemesis_for(cluster: Cluster) -> Iterator[Nemesis]:
    """A nemesis whose faults are all healed on exit, whatever happened inside."""
    nemesis = Nemesis(cluster)
    try:
        yield nemesis
    finally:
        nemesis.heal_all()
