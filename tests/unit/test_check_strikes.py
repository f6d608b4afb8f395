"""A strike is typed: the workload's event names the victim, the strike picks the fault."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast
from unittest.mock import create_autospec

import pytest

from chaos.check import (
    KILL_NODE,
    KILL_PROCESS,
    KILL_RAYLET,
    STOP_RAY,
    Strike,
    strike_on,
)
from chaos.experiment import Experiment
from chaos.history import Event
from chaos.nemesis import Fault, Nemesis
from chaos.workload.run import WorkloadRun


def busy(**fields: object) -> Event:
    return Event(t=1.0, source="workload-1", kind="node_busy", fields=dict(fields))


@pytest.mark.parametrize(
    ("strike", "method", "args"),
    [
        (KILL_NODE, "kill_node", ("worker-1",)),
        (KILL_RAYLET, "kill_raylet", ("worker-1",)),
        (STOP_RAY, "stop_node", ("worker-1",)),
        (KILL_PROCESS, "kill_worker", ("worker-1", 116)),
    ],
)
def test_each_strike_calls_its_nemesis_method_on_the_named_victim(
    strike: Strike, method: str, args: tuple[object, ...]
) -> None:
    nemesis = create_autospec(Nemesis, instance=True)
    fault = strike(nemesis, busy(node_name="worker-1", pid="116"))
    getattr(nemesis, method).assert_called_once_with(*args)
    assert fault is getattr(nemesis, method).return_value
    others = ("kill_node", "kill_raylet", "stop_node", "kill_worker")
    assert [n for n in others if getattr(nemesis, n).called] == [method]


@pytest.mark.parametrize("strike", [KILL_NODE, KILL_RAYLET, STOP_RAY, KILL_PROCESS])
def test_an_event_naming_no_node_is_not_struck(strike: Strike) -> None:
    nemesis = create_autospec(Nemesis, instance=True)
    with pytest.raises(AssertionError, match="node_busy event names no node"):
        strike(nemesis, busy(pid=116))
    assert nemesis.mock_calls == []


def test_a_process_strike_needs_a_pid() -> None:
    nemesis = create_autospec(Nemesis, instance=True)
    with pytest.raises(AssertionError, match="node_busy event names no pid"):
        KILL_PROCESS(nemesis, busy(node_name="worker-1"))
    assert nemesis.mock_calls == []


def test_strike_on_waits_for_the_counted_event_and_strikes_what_it_names() -> None:
    nemesis = create_autospec(Nemesis, instance=True)
    experiment = cast("Experiment", SimpleNamespace(nemesis=nemesis))
    run = create_autospec(WorkloadRun, instance=True)
    first, second = busy(node_name="worker-1"), busy(node_name="worker-2")
    run.wait_for.return_value = [first, second]

    fault, event = strike_on(experiment, run, "node_busy", KILL_RAYLET, count=2, timeout=9.0)

    run.wait_for.assert_called_once_with("node_busy", count=2, timeout=9.0)
    nemesis.kill_raylet.assert_called_once_with("worker-2")
    assert event is second and fault is nemesis.kill_raylet.return_value


def test_any_callable_of_nemesis_and_event_is_a_strike() -> None:
    nemesis = create_autospec(Nemesis, instance=True)
    experiment = cast("Experiment", SimpleNamespace(nemesis=nemesis))
    run = create_autospec(WorkloadRun, instance=True)
    run.wait_for.return_value = [busy(node_name="worker-3")]

    def pause(n: Nemesis, e: Event) -> Fault:
        return n.pause_node(str(e.get("node_name")))

    fault, _ = strike_on(experiment, run, "node_busy", pause)
    nemesis.pause_node.assert_called_once_with("worker-3")
    assert fault is nemesis.pause_node.return_value
