"""The agent API's bounded polling (``raychaos_agent.until``), run on the host: it is stdlib only."""

from __future__ import annotations

import itertools
import time

from chaos.agent.raychaos_agent import until


def test_until_returns_the_first_value_that_is_done() -> None:
    counter = itertools.count()
    assert until(lambda: next(counter), lambda v: v >= 3, timeout=5, period=0.01) == 3


def test_until_gives_up_at_the_timeout_with_the_last_value() -> None:
    counter = itertools.count()
    started = time.monotonic()
    last = until(lambda: next(counter), lambda v: False, timeout=0.2, period=0.05)
    elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 1.0
    assert last >= 3, "it kept fetching until the deadline"
    assert next(counter) == last + 1, "the value returned is the last one fetched"
