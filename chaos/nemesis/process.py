"""Faults on one process inside a node: the raylet, the GCS server, a Ray worker.

Processes are found and killed by PID inside their own node, never by name across the host
(many clusters share it). Dead means reaped or a zombie: a SIGKILLed process lingers as one
until the node's PID 1 reaps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import CheckFailed, FaultNotObserved
from chaos.nemesis.base import Fault, run, sh

if TYPE_CHECKING:
    from collections.abc import Sequence

    from chaos.cluster.cluster import Cluster


def _live(cluster: Cluster, node: str, column: str) -> list[tuple[int, str]]:
    """(PID, ``ps`` column ``column``) of every live process in ``node`` (zombies excluded).
    A failed ``ps`` raises :class:`~chaos.errors.ChaosError`: it is not "no such process"."""
    output = run(cluster, node, ["ps", "-eo", f"pid=,stat=,{column}="], timeout=15)
    found = []
    for line in output.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and not fields[1].startswith("Z"):
            found.append((int(fields[0]), fields[2]))
    return found


def pids(cluster: Cluster, node: str, process: str) -> list[int]:
    """PIDs of live processes called exactly ``process`` in ``node`` (zombies excluded)."""
    return [pid for pid, name in _live(cluster, node, "comm") if name == process]


def only_pid(cluster: Cluster, node: str, process: str) -> int:
    found = pids(cluster, node, process)
    if len(found) != 1:
        raise FaultNotObserved(f"expected one {process} in {node}, found PIDs {found}")
    return found[0]


def running(cluster: Cluster, node: str, pid: int) -> bool:
    """Whether ``pid`` runs in ``node`` (a zombie counts as gone)."""
    stat = sh(cluster, node, f"cat /proc/{int(pid)}/stat 2>/dev/null || echo gone", timeout=15)
    fields = stat.rsplit(")", 1)[-1].split()
    return not (fields in ([], ["gone"]) or fields[0] in {"Z", "X"})


def still_running(cluster: Cluster, node: str, found: Sequence[int]) -> list[int]:
    """Those of the PIDs ``found`` that still run in ``node``: what a fault should have ended,
    read once, for a verdict to judge."""
    return [pid for pid in found if running(cluster, node, pid)]


def assert_gone(cluster: Cluster, node: str, pid: int) -> None:
    """:class:`~chaos.errors.CheckFailed` while ``pid`` runs in ``node``."""
    if running(cluster, node, pid):
        raise CheckFailed(f"PID {pid} still runs in {node}")


@dataclass(eq=False)
class KillWorker(Fault):
    """SIGKILL one process of ``node`` by PID (a Ray worker running a task or actor); nothing
    to undo. The base of the kills below, which find their PID themselves."""

    node: str
    pid: int
    kind = "kill_worker"
    permanent = True

    @property
    def target(self) -> str:
        return f"{self.node}:pid {self.pid}"

    @property
    def details(self) -> dict[str, Any]:
        return {"pid": self.pid}

    def inject(self, cluster: Cluster) -> None:
        run(cluster, self.node, ["kill", "-9", str(self.pid)], timeout=15)

    def verify(self, cluster: Cluster) -> None:
        assert_gone(cluster, self.node, self.pid)


@dataclass(eq=False)
class KillRaylet(KillWorker):
    """SIGKILL the raylet of ``node``; the host stays up (its Ray node id dies)."""

    pid: int = field(default=0, init=False)
    kind = "kill_raylet"

    @property
    def target(self) -> str:
        return f"{self.node}:raylet"

    @property
    def takes_down(self) -> Sequence[str]:
        return (self.node,)

    def prepare(self, cluster: Cluster) -> None:
        self.pid = only_pid(cluster, self.node, "raylet")


@dataclass(eq=False)
class KillGcs(KillWorker):
    """SIGKILL the GCS server (on the head unless ``node`` names another); the head's raylet
    keeps running."""

    node: str = ""
    pid: int = field(default=0, init=False)
    kind = "kill_gcs"

    @property
    def target(self) -> str:
        return f"{self.node}:gcs_server"

    def prepare(self, cluster: Cluster) -> None:
        self.node = self.node or cluster.head.name
        self.pid = only_pid(cluster, self.node, "gcs_server")


#: The autoscaler's process on the head: Ray's monitor script, v1 or v2.
MONITOR_SCRIPTS = ("ray/autoscaler/_private/monitor.py", "ray/autoscaler/v2/monitor.py")


def monitor_pids(cluster: Cluster, node: str) -> list[int]:
    """PIDs of the autoscaler's monitor processes in ``node`` (by their script's path, one of
    the interpreter's arguments: ``python3 -u …/monitor.py``)."""
    return [
        pid
        for pid, args in _live(cluster, node, "args")
        if any(arg.endswith(MONITOR_SCRIPTS) for arg in args.split()[1:])
    ]


def ray_start_pids(cluster: Cluster, node: str) -> list[int]:
    """PIDs of ``ray start`` processes in ``node`` (``python …/bin/ray start …``): one only
    while it blocks (``--block``); a plain ``ray start`` returns once Ray is up."""
    found = []
    for pid, args in _live(cluster, node, "args"):
        argv = args.split()
        if len(argv) > 2 and argv[1].endswith("/ray") and argv[2] == "start":
            found.append(pid)
    return found


@dataclass(eq=False)
class KillAutoscaler(KillWorker):
    """SIGKILL the head's autoscaler (Ray's monitor process); the rest of the head runs on."""

    node: str = ""
    pid: int = field(default=0, init=False)
    kind = "kill_autoscaler"

    @property
    def target(self) -> str:
        return f"{self.node}:monitor"

    def prepare(self, cluster: Cluster) -> None:
        self.node = self.node or cluster.head.name
        found = monitor_pids(cluster, self.node)
        if len(found) != 1:
            raise FaultNotObserved(f"expected one autoscaler monitor in {self.node}: {found}")
        self.pid = found[0]
