"""Allure steps for the harness's actions: boot, workload, inject / verify / heal, waits, checks.

The harness (fixtures, nemesis runner, waits, workload runs, checks) wraps each action in
:func:`step`, so every experiment's Allure result reads as the list of what was done, with no
edit to the experiments. Titles are for a reader who did not write the test: "inject: kill
node worker-1 (SIGKILL)", "wait: 1 × 'task_running' from workloads.tasks:… ≤ 180 s".

Harmless everywhere: without allure-pytest or without ``--alluredir`` ``allure.step`` has no
listener and does nothing; outside pytest (a :class:`~chaos.cluster.cluster.Cluster` used as a
context manager) the same; a failure of the reporting itself is swallowed, never the action's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _open(title: str) -> Any:
    try:
        import allure

        context: Any = allure.step(title)
        context.__enter__()
        return context
    except Exception:  # noqa: BLE001 - reporting never breaks an action
        return None


def _close(context: Any, exc: BaseException | None) -> None:
    if context is None:
        return
    with contextlib.suppress(Exception):
        context.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


@contextlib.contextmanager
def step(title: str) -> Iterator[None]:
    """Run the block as the Allure step ``title`` (failed or broken if the block raises)."""
    context = _open(title)
    try:
        yield
    except BaseException as exc:
        _close(context, exc)
        raise
    _close(context, None)


def mark(title: str) -> None:
    """An instantaneous step: something that happened (a workload started, a signal sent)."""
    with step(title):
        pass


def seconds(value: float) -> str:
    """``42 s``, ``1.5 s``: bounds in titles, as short as they can be."""
    return f"{value:.0f} s" if value >= 10 or value == int(value) else f"{value:.1f} s"


def short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (a title must not carry a traceback)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
