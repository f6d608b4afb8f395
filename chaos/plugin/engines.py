"""Runs over several Docker engines: which workers boot where, and the one ``EngineLost``
line a test ends with when its engine stops answering (:func:`lost_engine_instead`, which the
per-test wrappers of :mod:`chaos.plugin.hooks` put around each phase; inert until a test
boots on an engine)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from chaos.errors import ChaosError
from chaos.plugin.interrupts import INTERRUPTED
from chaos.plugin.keys import ENGINE_KEY, SETTINGS_KEY
from chaos.plugin.settings import Settings

#: The controller said which workers boot where (once per run).
ENGINES_SAID_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller (it collects nothing, so :func:`pytest_collection_finish` says nothing
    there): once the first worker has collected, say which workers boot on which engine —
    only when several engines are configured, which names raychaos on purpose."""
    config: pytest.Config = node.config
    if config.stash.get(ENGINES_SAID_KEY, False):
        return
    config.stash[ENGINES_SAID_KEY] = True
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in engine_lines(config, config.stash[SETTINGS_KEY]):
            reporter.write_line(line)


def engine_lines(config: pytest.Config, settings: Settings) -> list[str]:
    """The header's word on engines: which workers boot where (only with several)."""
    from chaos.plugin.backend import assignment, display, engine_urls

    urls = engine_urls(settings.docker_hosts)
    if len(urls) < 2:
        return []
    workers = getattr(config.option, "numprocesses", None) or 0
    placed = assignment(urls, int(workers) if str(workers).isdigit() else 0)
    lines = [
        "raychaos: engines ("
        + str(settings.sources.get("docker_hosts"))
        + "): "
        + "; ".join(f"{display(u)} ← {', '.join(w) or 'no worker'}" for u, w in placed.items())
    ]
    idle = [display(u) for u, w in placed.items() if not w]
    if idle:
        lines.append(
            f"raychaos: WARNING: {len(idle)} engine(s) get no experiments ({', '.join(idle)}): "
            f"run with -n {len(urls)} or more"
        )
    return lines


# -- an engine that stops answering ----------------------------------------------------------
def _engine_lost(item: pytest.Item, exc: Exception) -> ChaosError | None:
    """When a phase of a test that boots on an engine raised and that engine no longer answers
    a ping: the one ``EngineLost`` line the test ends with instead (whatever was raised, an
    AssertionError too: a dead engine proves nothing about Ray)."""
    engine = item.stash.get(ENGINE_KEY, None)
    if engine is None or INTERRUPTED.is_set():
        return None
    from chaos.plugin.backend import EngineLost

    if isinstance(exc, EngineLost) or engine.check() is None:
        return None
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    # An xfail test (a recorded finding) whose engine died ends broken, not xfailed: every
    # finding's strict xfail names its own exception (raises=…), never EngineLost.
    return engine.lost_error(f"{type(exc).__name__}: {first}")


def engine_lost_already(item: pytest.Item) -> bool:
    """The engine of ``item``'s clusters is known to be lost (no ping: only what was seen)."""
    engine = item.stash.get(ENGINE_KEY, None)
    return engine is not None and bool(engine.lost)


@contextlib.contextmanager
def lost_engine_instead(item: pytest.Item) -> Iterator[None]:
    """Re-raise what a test phase raised as ``EngineLost`` when its engine is gone."""
    try:
        yield
    except Exception as exc:
        lost = _engine_lost(item, exc)
        if lost is None:
            raise
        raise lost from exc
