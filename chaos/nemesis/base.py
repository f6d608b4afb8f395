"""The fault contract, and the runner that keeps the promises every fault makes.

A fault is one small class: it may look before striking (``prepare``, no effect), strikes
(``inject``), proves its effect (``verify``) and undoes itself, proving that too (``undo``).
The :class:`Runner` does the rest, so that no fault can forget it: it registers the heal
*before* the strike (a fault whose ``inject`` raises is still healed at teardown), records
``inject`` / ``verified`` / ``heal`` in the history, turns an effect nobody could see into
:class:`~chaos.errors.FaultNotObserved` (inconclusive, never passed), and records a failed heal
(``heal_failed``) and retries it once before raising :class:`~chaos.errors.HealError`.

Faults reach the engine only through the cluster (``cluster.exec``, ``cluster.backend``); every
exec's exit code is checked (:func:`run`), because a command that failed proves nothing.
"""

from __future__ import annotations

import abc
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from chaos.errors import ChaosError, FaultNotObserved, HealError, ImageLacksTool
from chaos.history import Kind, Source
from chaos.steps import seconds, step
from chaos.waits import poll

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: How long an effect (or its undo) may take to show before the fault is not observed.
VERIFY_TIMEOUT_S = 20.0

#: How each fault of the standard set reads in a report: (what, how) by kind; ``{node}`` is
#: the target's node, ``{pid}`` a PID from the fault's details.
_TITLES = {
    "kill_node": ("kill node {target}", "SIGKILL"),
    "stop_node": ("stop Ray on {target}", "ray stop: SIGTERM, then SIGKILL"),
    "restart_node": ("restart node {target}", "new Ray node id"),
    "pause_node": ("pause node {target}", "every process frozen"),
    "kill_worker": ("kill process {pid} on {node}", "SIGKILL"),
    "kill_raylet": ("kill the raylet of {node}", "SIGKILL, pid {pid}"),
    "kill_gcs": ("kill the GCS on {node}", "SIGKILL, pid {pid}"),
    "partition": ("partition the network {target}", "iptables"),
    "degrade": ("degrade the network of {target}", "{rule}"),
    "memory_pressure": ("fill the memory of {target}", "{bytes:,} bytes"),
    "fill_disk": ("fill the disk of {target}", "{path} to {fraction:.0%}"),
    "rpc_failures": ("fail the RPCs of {workload} on {node}", "RAY_testing_rpc_failure"),
}


def describe(fault: Fault) -> str:
    """A fault as a report says it: "kill node worker-1 (SIGKILL)"."""
    if isinstance(fault, Together):
        return " + ".join(describe(p) for p in fault.parts)
    target = fault.target
    fields = {"target": target, "node": target.split(":", 1)[0], "pid": "?", **fault.details}
    what, how = _TITLES.get(fault.kind, (f"{fault.kind.replace('_', ' ')} on {{target}}", ""))
    try:
        return what.format(**fields) + (f" ({how.format(**fields)})" if how else "")
    except (KeyError, ValueError, TypeError):  # a subclass with other details
        return f"{fault.kind.replace('_', ' ')} on {target}"


class Fault(abc.ABC):
    """One fault: subclass it, set ``kind``, and write ``target``, ``inject`` and ``verify``.

    Run it with ``nemesis.inject(fault)``; the object returned is the fault itself, now
    carrying ``injected_at``, and a context manager that heals it on exit. A fault strikes
    once: make a new object to strike again.
    """

    #: What the history calls this fault ("kill_node"); set by every subclass.
    kind: str
    #: Nothing to undo (a SIGKILL): heal only records that the fault is over.
    permanent: bool = False
    #: Seconds :meth:`verify` (and the proof inside :meth:`undo`) may take to hold.
    verify_timeout_s: float = VERIFY_TIMEOUT_S

    # Set by the runner.
    injected_at: float = 0.0
    healed: bool = False
    _runner: Runner | None = None
    _heal_error: HealError | None = None

    @property
    @abc.abstractmethod
    def target(self) -> str:
        """Where it strikes, as the history shows it ("worker-1", "worker-1:raylet")."""

    @property
    def details(self) -> dict[str, Any]:
        """What else the ``inject`` event records (a PID, a rule, a chain); known after prepare."""
        return {}

    @property
    def takes_down(self) -> Sequence[str]:
        """Nodes whose current Ray node id this fault ends on purpose (INV-02 spares them)."""
        return ()

    def prepare(self, cluster: Cluster) -> None:  # noqa: B027 — optional step, no effect
        """Look before striking (find a PID, check a path) and refuse what cannot work.

        No effect on the cluster: nothing is registered or recorded yet when this raises.
        """

    @abc.abstractmethod
    def inject(self, cluster: Cluster) -> None:
        """Strike. Raise :class:`ChaosError` if the engine refuses."""

    @abc.abstractmethod
    def verify(self, cluster: Cluster) -> None:
        """Raise AssertionError while the effect is not (yet) seen; retried for
        ``verify_timeout_s``."""

    def undo(self, cluster: Cluster) -> None:  # noqa: B027 — permanent faults undo nothing
        """Undo the effect and prove it is gone (raise if not). It must be safe to call again,
        and after a partial or failed ``inject``."""

    def heal(self) -> None:
        """Undo this fault now (through its nemesis, which records and retries it)."""
        if self._runner is None:
            raise ChaosError(f"{self.kind} on {self.target} was never injected")
        self._runner.heal(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()


F = TypeVar("F", bound=Fault)


class Together(Fault):
    """Several faults struck as one: prepared, injected and verified in order, undone newest
    first; e.g. ``nemesis.inject(Together(PauseNode("worker-1"), Degrade("worker-2",
    delay_ms=100)))``. One ``inject`` event names them all (``kind`` "pause_node+degrade")."""

    def __init__(self, *parts: Fault) -> None:
        if len(parts) < 2:
            raise ChaosError(f"Together needs at least two faults, got {len(parts)}")
        if any(p._runner is not None for p in parts):
            raise ChaosError("Together takes faults not yet injected")
        self.parts = parts
        self.kind = "+".join(p.kind for p in parts)
        self.permanent = all(p.permanent for p in parts)
        self.verify_timeout_s = max(p.verify_timeout_s for p in parts)
        self._verified: set[int] = set()
        self._undone: set[int] = set()

    @property
    def target(self) -> str:
        return " & ".join(p.target for p in self.parts)

    @property
    def details(self) -> dict[str, Any]:
        return {"parts": [{"fault": p.kind, "target": p.target, **p.details} for p in self.parts]}

    @property
    def takes_down(self) -> Sequence[str]:
        return [name for p in self.parts for name in p.takes_down]

    def prepare(self, cluster: Cluster) -> None:
        for part in self.parts:
            part.prepare(cluster)

    def inject(self, cluster: Cluster) -> None:
        for part in self.parts:
            part.injected_at = self.injected_at
            part.inject(cluster)

    def verify(self, cluster: Cluster) -> None:
        for index, part in enumerate(self.parts):
            if index not in self._verified:  # a verified part is not checked (or waited) again
                part.verify(cluster)
                self._verified.add(index)

    def undo(self, cluster: Cluster) -> None:
        errors = []
        for index in reversed(range(len(self.parts))):
            if index in self._undone:
                continue
            part = self.parts[index]
            try:
                part.undo(cluster)
            except Exception as exc:  # noqa: BLE001 — the other parts are still undone
                errors.append(f"{part.kind} on {part.target}: {exc}")
                continue
            part.healed = True
            self._undone.add(index)
        if errors:
            raise ChaosError("; ".join(errors))


class Runner:
    """Strikes faults on one cluster and heals them; :class:`~chaos.nemesis.nemesis.Nemesis`
    adds a method per fault on top."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        #: Every fault struck, oldest first (healed ones included).
        self.faults: list[Fault] = []
        #: Ray node ids this experiment took down on purpose (INV-02 spares them).
        self.killed_node_ids: set[str] = set()

    def inject(self, fault: F) -> F:
        """Strike ``fault`` and prove its effect; return it (a context manager that heals)."""
        if fault._runner is not None:
            raise ChaosError(
                f"{fault.kind} on {fault.target} was already injected",
                hint="a fault strikes once: make a new one",
            )
        cluster, history = self.cluster, self.cluster.history
        fault.prepare(cluster)
        for name in fault.takes_down:
            node_id = cluster.node(name).node_id
            if node_id:
                self.killed_node_ids.add(node_id)
        # Registered before it strikes: whatever happens next, heal_all undoes it.
        fault._runner = self
        self.faults.append(fault)
        kind, target, title = fault.kind, fault.target, describe(fault)
        with step(f"inject: {title}"):
            fault.injected_at = history.record(
                Source.NEMESIS, Kind.INJECT, fault=kind, target=target, **fault.details
            ).t
            fault.inject(cluster)
        bound = f" ≤ {seconds(fault.verify_timeout_s)}" if fault.verify_timeout_s else ""
        with step(f"verify: {title} took effect{bound}"):
            try:
                poll(lambda: fault.verify(cluster), fault.verify_timeout_s)
            except AssertionError as exc:
                history.record(
                    Source.NEMESIS, Kind.NOT_OBSERVED, fault=kind, target=target, error=str(exc)
                )
                raise FaultNotObserved(
                    f"{kind} on {target} was injected but not observed: {exc}",
                    hint="the experiment is inconclusive; see the history for what was seen",
                ) from None
            history.record(Source.NEMESIS, Kind.VERIFIED, fault=kind, target=target)
        return fault

    def heal(self, fault: Fault) -> None:
        """Undo ``fault`` (verified); a failure is recorded and retried once, then raised."""
        if fault.healed:
            return
        if fault._heal_error is not None:  # failed twice already: the state is unknown
            raise fault._heal_error
        history = self.cluster.history
        error: Exception | None = None
        what = "over (nothing to undo)" if fault.permanent else "undone"
        for attempt in (1, 2):
            again = " (second attempt)" if attempt == 2 else ""
            try:
                with step(f"heal: {describe(fault)} {what}{again}"):
                    fault.undo(self.cluster)
            except Exception as exc:  # noqa: BLE001 — any failed undo is recorded, then retried
                error = exc
                history.record(
                    Source.NEMESIS,
                    Kind.HEAL_FAILED,
                    fault=fault.kind,
                    target=fault.target,
                    attempt=attempt,
                    error=f"{type(exc).__name__}: {exc}",
                )
                continue
            fault.healed = True
            history.record(
                Source.NEMESIS,
                Kind.HEAL,
                fault=fault.kind,
                target=fault.target,
                permanent=fault.permanent,
            )
            return
        fault._heal_error = HealError(
            f"healing {fault.kind} on {fault.target} failed twice: {error}",
            hint="the cluster is in an unknown state; see heal_failed in the history",
        )
        raise fault._heal_error from error

    def heal_all(self) -> None:
        """Heal every fault still active, newest first; report every failure together."""
        errors = []
        for fault in reversed(self.faults):
            try:
                self.heal(fault)
            except ChaosError as exc:
                errors.append(str(exc))
        if errors:
            raise HealError("; ".join(errors), hint="the cluster is in an unknown state")


#: `timeout` (every exec runs under it) and sh exit with this when the command is missing.
COMMAND_NOT_FOUND = 127


def run(cluster: Cluster, node: str, argv: Sequence[str], *, timeout: float = 30) -> str:
    """Run ``argv`` in ``node``; its output, or a :class:`ChaosError` naming the node, the
    command, its exit code and output (a failed ``ps`` once read as "no raylet")."""
    result = cluster.exec(node, argv, timeout=timeout)
    if result.exit_code == COMMAND_NOT_FOUND:
        raise ImageLacksTool(
            f"in {node}: `{shlex.join(argv)}` exited {COMMAND_NOT_FOUND} (command not found): "
            f"{result.output.strip()[-300:] or '(no output)'}",
            hint=f"the image lacks the tool: mark the experiment @pytest.mark.needs_tools("
            f"{argv[0]!r}) so it skips on such images (the image contract: docs/images.md)",
        )
    if result.exit_code != 0:
        raise ChaosError(
            f"in {node}: `{shlex.join(argv)}` exited {result.exit_code}: "
            f"{result.output.strip()[-500:] or '(no output)'}",
            hint="124 means it ran past its timeout"
            if result.exit_code == 124
            else "the node may be down, paused or missing the tool",
        )
    return result.output


def sh(cluster: Cluster, node: str, script: str, *, timeout: float = 30) -> str:
    """:func:`run` a shell script (its exit code is the script's: chain with ``&&``)."""
    return run(cluster, node, ["sh", "-c", script], timeout=timeout)


def host_up(cluster: Cluster, node: str) -> bool:
    """Whether the node's host runs (or is paused). A stopped host took its network
    namespace, tmpfs and processes with it: there is nothing left to undo inside."""
    return cluster.backend.state(node) in {"running", "paused"}
