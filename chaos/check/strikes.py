"""Strikes keyed on workload events: the workload says what to hit, the nemesis hits it.

A workload emits one event naming its victim (``node_name``, and ``pid`` for a process) and
then detects the consequences itself. :func:`strike_on` waits for that event and applies a
:data:`Strike` to it through the nemesis, so the fault is verified and INV-02 knows the victim.

A strike is any ``(nemesis, event) -> Fault`` callable: the four below cover the node-level
experiments, and a suite of your own can pass its own (e.g. pausing the named node).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from chaos.errors import CheckFailed
from chaos.history import Event
from chaos.nemesis import Fault, Nemesis
from chaos.steps import step

if TYPE_CHECKING:
    from chaos.experiment import Experiment
    from chaos.workload.run import WorkloadRun

#: A fault aimed by a workload event.
Strike: TypeAlias = Callable[[Nemesis, Event], Fault]


def victim_node(event: Event) -> str:
    """The node a workload event names as the victim (``node_name``)."""
    name = event.get("node_name")
    if not name:
        raise CheckFailed(f"the workload's {event.kind} event names no node: {event.fields}")
    return str(name)


def victim_pid(event: Event) -> int:
    """The process a workload event names as the victim (``pid``, on ``node_name``)."""
    pid = event.get("pid")
    if pid is None:
        raise CheckFailed(f"the workload's {event.kind} event names no pid: {event.fields}")
    return int(pid)


def _kill_node(nemesis: Nemesis, event: Event) -> Fault:
    return nemesis.kill_node(victim_node(event))


def _kill_raylet(nemesis: Nemesis, event: Event) -> Fault:
    return nemesis.kill_raylet(victim_node(event))


def _stop_ray(nemesis: Nemesis, event: Event) -> Fault:
    return nemesis.stop_node(victim_node(event))


def _kill_process(nemesis: Nemesis, event: Event) -> Fault:
    return nemesis.kill_worker(victim_node(event), victim_pid(event))


#: SIGKILL the named node's container: the whole node dies at once.
KILL_NODE: Strike = _kill_node
#: SIGKILL only the named node's raylet: the container and its other processes stay up.
KILL_RAYLET: Strike = _kill_raylet
#: ``ray stop`` on the named node (SIGTERM): the raylet unregisters itself, a graceful exit.
STOP_RAY: Strike = _stop_ray
#: SIGKILL the process ``pid`` on the named node (a worker, an actor, a driver).
KILL_PROCESS: Strike = _kill_process


def strike_on(
    experiment: Experiment,
    run: WorkloadRun,
    kind: str,
    strike: Strike,
    *,
    count: int = 1,
    timeout: float = 180.0,
) -> tuple[Fault, Event]:
    """Wait for the ``count``-th ``kind`` event of ``run`` and ``strike`` what it names."""
    nth = f"{count}th " if count > 1 else ""
    with step(f"strike: where the workload's {nth}'{kind}' event points"):
        event = run.wait_for(kind, count=count, timeout=timeout)[-1]
        return strike(experiment.nemesis, event), event
