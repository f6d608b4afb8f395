"""The order of raychaos' hooks around a test: one wrapper per phase, its pieces in order.

Registration order decides nothing: each phase has one wrapper in ``chaos.plugin.hooks``, and
the two set-up wrappers that must sit either side of allure-pytest's say so (tryfirst,
trylast). Checked on this very session's plugin manager, and by driving the call wrapper.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pluggy import HookImpl

from chaos.errors import ChaosError
from chaos.plugin import hooks
from chaos.plugin.keys import ENGINE_KEY, EXPERIMENT_KEY, FACTORY_KEY, NEXT_ITEM


def ours(config: pytest.Config, hook: str) -> list[HookImpl]:
    """raychaos' implementations of ``hook``, innermost first (pluggy calls the last first)."""
    impls = getattr(config.hook, hook).get_hookimpls()
    return [i for i in impls if i.plugin_name.startswith("chaos.plugin")]


def test_the_plugin_registers_its_modules(pytestconfig: pytest.Config) -> None:
    names = {name for name, _ in pytestconfig.pluginmanager.list_name_plugin()}
    assert {"raychaos", "chaos.plugin.hooks", "chaos.plugin.fixtures"} <= names


@pytest.mark.parametrize(
    "hook", ["pytest_runtest_protocol", "pytest_runtest_call", "pytest_runtest_teardown"]
)
def test_one_wrapper_per_phase(pytestconfig: pytest.Config, hook: str) -> None:
    impls = ours(pytestconfig, hook)
    assert [(i.plugin_name, i.wrapper) for i in impls] == [("chaos.plugin.hooks", True)]


def test_the_setup_wrappers_sit_either_side_of_allure_pytests(
    pytestconfig: pytest.Config,
) -> None:
    """Innermost: the trial's Allure parameter and lost-engine translation (after allure-pytest
    opened the result, before any fixture). Outermost: the labels (after allure-pytest's own
    wrapper filled the result in)."""
    impls = ours(pytestconfig, "pytest_runtest_setup")
    assert [(i.plugin_name, i.tryfirst, i.trylast) for i in impls] == [
        ("chaos.plugin.hooks", False, True),
        ("chaos.plugin.allure", True, False),
    ]


def test_allure_reads_the_report_the_hooks_module_left(pytestconfig: pytest.Config) -> None:
    impls = ours(pytestconfig, "pytest_runtest_makereport")
    assert [(i.plugin_name, i.tryfirst) for i in impls] == [
        ("chaos.plugin.hooks", False),
        ("chaos.plugin.allure", True),
    ]


class Engine:
    """An engine that stopped answering."""

    name = "tcp://gone:2376"
    lost = ""

    def check(self) -> str | None:
        self.lost = "no answer"
        return self.lost

    def lost_error(self, during: str = "") -> ChaosError:
        return ChaosError(f"engine lost during {during}")


def test_the_call_wrapper_runs_its_pieces_in_the_stated_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Boot ahead, the body, its logs, the evidence, the CPU at the body's end, and only then
    the EngineLost line."""
    done: list[str] = []
    factory = SimpleNamespace(
        clusters=["one"],
        boot_ahead=lambda nxt: done.append(f"boot ahead {nxt}"),
        attach_logs=lambda why: done.append(f"logs: {why}"),
        cpu_point=lambda point: done.append(f"cpu at {point}"),
    )
    item: Any = SimpleNamespace(
        stash=pytest.Stash(),
        nodeid="test_x",
        get_closest_marker=lambda name: None,
        config=SimpleNamespace(rootpath=tmp_path),
    )
    item.stash[FACTORY_KEY] = factory
    item.stash[NEXT_ITEM] = "test_y"
    item.stash[EXPERIMENT_KEY] = object()
    item.stash[ENGINE_KEY] = Engine()
    monkeypatch.setattr(hooks, "_attach_evidence", lambda it: done.append("evidence"))

    wrapper = hooks.pytest_runtest_call(item)
    next(wrapper)
    done.append("body")
    with pytest.raises(ChaosError, match="engine lost during RuntimeError: no route") as lost:
        wrapper.throw(RuntimeError("no route"))
    assert isinstance(lost.value.__cause__, RuntimeError)
    assert done == [
        "boot ahead test_y",
        "body",
        "logs: the test failed",
        "evidence",
        "cpu at body_end",
    ]
