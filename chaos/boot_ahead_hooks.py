"""The pytest side of :mod:`chaos.boot_ahead`: when to start, and when to drop, a boot ahead.

- ``pytest_runtest_protocol``: remember which test comes next in this process.
- ``pytest_runtest_call``: the test's own clusters are up and its body starts — boot the next
  test's cluster now (only from a test that booted through the factory: its engine is known).
- ``pytest_runtest_teardown``: a cluster booted for this test that it did not take goes.
- ``pytest_sessionfinish``: whatever is still booting ahead goes.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from chaos.testkit import BOOT_AHEAD, FACTORY_KEY, say

#: The test this process runs after the current one (None: the last, or not yet known).
NEXT_ITEM = pytest.StashKey["pytest.Item | None"]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    item.stash[NEXT_ITEM] = nextitem
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    factory = item.stash.get(FACTORY_KEY, None)
    if factory is not None and factory.clusters:
        try:
            factory.boot_ahead(item.stash.get(NEXT_ITEM, None))
        except Exception as exc:  # noqa: BLE001 - an optimisation must never fail a test
            say(f"raychaos: could not boot the next test's cluster ahead: {exc}")
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        BOOT_AHEAD.discard(item.nodeid)


@pytest.hookimpl
def pytest_sessionfinish(session: pytest.Session) -> None:
    BOOT_AHEAD.discard()
