"""What a backend must do for a cluster: the one seam between raychaos and an engine.

A backend realises a :class:`~chaos.spec.plan.ClusterPlan` (one container, pod or VM per
node) and gives the rest of raychaos a handful of verbs on nodes *by name*: run a command,
stream one, kill, restart, pause, read logs. The cluster, the nemesis, the observer and the
checks speak only these verbs, so a second backend (KubeRay, see ``docs/kuberay.md``) is one
new module that implements :class:`Backend`; nothing else imports an engine's client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, get_args

if TYPE_CHECKING:
    import ipaddress

    from chaos.errors import ChaosError
    from chaos.history import Event
    from chaos.spec.image_contract import ImageProbe
    from chaos.spec.plan import NodePlan

#: What a backend says about a node's host (container, pod): the words Docker uses.
HostState = Literal["created", "running", "paused", "restarting", "exited", "dead", "gone"]
HOST_STATES: frozenset[str] = frozenset(get_args(HostState))


@dataclass(frozen=True)
class ExecResult:
    """A command run to completion inside a node."""

    exit_code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Stream(Protocol):
    """A process inside a node whose marked output lines arrive live as events."""

    #: The history source its events carry (``workload-3``, ``observer``, ``ready-1``).
    source: str
    #: Unmarked output lines, in order.
    output: list[str]
    #: Exit code once ended (None while running, or when the engine could not tell).
    exit_code: int | None
    #: The PID the process reported in its first event, if any (to signal it inside the node).
    pid: int | None

    @property
    def running(self) -> bool: ...

    def events(self) -> list[Event]:
        """This process's own events so far: its private channel, apart from the history."""
        ...

    def wait(self, timeout: float) -> bool:
        """True once the process has ended (within ``timeout``)."""
        ...

    def wait_event(self, kinds: set[str], timeout: float) -> Event | None:
        """The first event of one of ``kinds`` (waiting at most ``timeout``), or None."""
        ...

    def stop(self, grace_s: float = 5.0) -> None: ...

    def tail(self, lines: int = 20) -> str: ...


#: Where a stream's events go besides its own channel (the experiment's history).
EventSink = Callable[["Event"], None]


class Backend(Protocol):
    """The verbs a cluster needs from an engine. Every method names nodes by plan name."""

    #: Short name shown in reports and labels ("docker").
    kind: str

    # -- life cycle ----------------------------------------------------------------------
    def ensure_image(self, ray_version: str, python: str) -> str:
        """An image reference holding Ray ``ray_version`` on Python ``python`` (built once)."""
        ...

    def node_image(self, image: str) -> ImageProbe | None:
        """A given image as a node image: None for one raychaos built (used as it is); for a
        team's own, the node image derived from it and what its probe found. Raises a
        one-line ChaosError when it is absent or cannot be a node."""
        ...

    def cpus(self) -> int:
        """CPUs of the engine's machine (cgroup CPU limits cannot exceed it)."""
        ...

    def ensure_base_image(self, python: str) -> str:
        """An image with Python and the system tools, without Ray (Redis runs from it)."""
        ...

    def create_network(self) -> ipaddress.IPv4Network:
        """The cluster's own network; nodes get fixed addresses in the subnet returned."""
        ...

    def create_volume(self, purpose: str) -> str:
        """A named volume that outlives node restarts (the RocksDB GCS store)."""
        ...

    def start_node(self, node: NodePlan) -> None:
        """Create and start the node's host as planned; ``node.ship_lib`` copies the agent and
        workloads in first."""
        ...

    def teardown(self) -> list[str]:
        """Remove everything this backend created; what could not be removed, one per item."""
        ...

    def remove_node(self, node: str) -> None:
        """Remove one node's host for good (an autoscaler's termination); gone is fine."""
        ...

    def describe(self, node: str) -> str:
        """How a person finds the node in the engine (a container name, a pod name)."""
        ...

    def inspect_hints(self, node: str) -> list[str]:
        """Commands a person runs to inspect the node (shown when a failed cluster is kept)."""
        ...

    # -- inside a node -------------------------------------------------------------------
    def exec(
        self, node: str, argv: Sequence[str], *, timeout: float, env: Mapping[str, str]
    ) -> ExecResult:
        """Run ``argv`` to completion, bounded by ``timeout`` inside the node."""
        ...

    def stream(
        self,
        node: str,
        argv: Sequence[str],
        *,
        source: str,
        sink: EventSink,
        env: Mapping[str, str],
        bound_s: float,
    ) -> Stream:
        """Start ``argv`` and deliver its marked lines as events (to ``sink`` and its channel)."""
        ...

    def copy(self, src: str, path: str, dst: str, dest_dir: str) -> None:
        """Copy ``path`` (a file or directory) from node ``src`` into ``dest_dir`` on ``dst``."""
        ...

    # -- the host as a whole ----------------------------------------------------------------
    def state(self, node: str) -> HostState: ...

    def started_at(self, node: str) -> float:
        """Wall-clock time the node's host last started."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL every process of the node, then its host (a crashed machine)."""
        ...

    def restart(self, node: str) -> None:
        """Start the node's host again (its entry runs ``ray start`` again)."""
        ...

    def pause(self, node: str) -> None: ...

    def unpause(self, node: str) -> None: ...

    def logs(self, node: str, *, tail: int, since: float | None = None) -> str:
        """The host's own output (``ray start``), last ``tail`` lines, from ``since`` on."""
        ...

    def set_cpu_weight(self, node: str, weight: int) -> None:
        """Relative CPU weight (cgroup shares); best effort, never raises."""
        ...

    def cpu_stalled_s(self, node: str) -> float | None:
        """Seconds the node's processes have waited for a CPU since its host started (the
        ``full`` total of its cgroup's pressure stall information), or None where the engine
        cannot say (not on this host, no PSI, the node gone); never raises."""
        ...


class Engine(Protocol):
    """The engine a test's clusters run on, as the pytest plugin tracks it across tests
    (:class:`chaos.backends.docker.engines.EngineUse`)."""

    url: str
    #: ``info()["ID"]`` (boot-slot locks) and ``info()["NCPU"]`` (boot slots).
    id: str
    cpus: int
    #: Why the engine is taken as lost ("" while it answers).
    lost: str

    @property
    def name(self) -> str: ...

    def check(self) -> str | None:
        """None while the engine answers; else why not (and it is lost from then on)."""
        ...

    def lost_error(self, during: str = "") -> ChaosError: ...
