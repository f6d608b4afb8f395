"""The run's schedule seed: drawn once (or given with ``--raychaos-seed``), the same in every
xdist worker, printed, and recorded on every test that asks for it.

A churn experiment builds its :class:`~chaos.spec.schedule.Schedule` from the
``raychaos_seed`` fixture; the Allure result carries the seed as a parameter (excluded from the
history id, so nights with other seeds share one history) and the command that replays it
as an attachment.
"""

from __future__ import annotations

import secrets
from typing import Any

import allure
import pytest

from chaos.plugin.keys import SETTINGS_KEY
from chaos.plugin.terminal import say

SEED_KEY = pytest.StashKey[int]()
SEED_INPUT = "raychaos_seed"
FIXTURE = "raychaos_seed"
#: Seeds are drawn below this (31 bits: they read back from any JSON or shell).
SEED_RANGE = 1 << 31


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Given, handed down by the xdist controller, or drawn here (after the settings)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput and SEED_INPUT in workerinput:
        config.stash[SEED_KEY] = int(workerinput[SEED_INPUT])
        return
    given = config.stash[SETTINGS_KEY].seed
    config.stash[SEED_KEY] = given if given is not None else secrets.randbelow(SEED_RANGE)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → workers: one seed for the whole session."""
    node.workerinput[SEED_INPUT] = node.config.stash[SEED_KEY]


def pytest_collection_finish(session: pytest.Session) -> None:
    """One line when a selected test uses the seed (never otherwise: a good guest). After
    collection, so tests deselected by ``-k`` or ``--raychaos-claims`` do not count."""
    config = session.config
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker not in (None, "gw0"):
        return
    if any(FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
        seed = config.stash[SEED_KEY]
        say(f"raychaos: schedule seed {seed} (replay it with --raychaos-seed {seed})")


def replay_command(nodeid: str, seed: int) -> str:
    """The command that runs ``nodeid`` again with the same schedule."""
    return f"pytest '{nodeid}' --raychaos-seed {seed}"


@pytest.fixture
def raychaos_seed(request: pytest.FixtureRequest) -> int:
    """The run's schedule seed; recorded on this test's Allure result with its replay."""
    seed = request.config.stash[SEED_KEY]
    allure.dynamic.parameter("seed", seed, excluded=True)
    allure.attach(
        replay_command(request.node.nodeid, seed),
        name=f"replay schedule seed {seed}",
        attachment_type=allure.attachment_type.TEXT,
    )
    return seed
