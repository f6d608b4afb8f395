"""Bounded waits: a state that must arrive (``wait_until``) and one that must stay (``holds_for``)."""

from __future__ import annotations

import time

import pytest

from chaos.errors import CheckFailed
from chaos.waits import holds_for, wait_until


def test_holds_for_checks_until_the_duration_is_spent() -> None:
    calls: list[float] = []
    started = time.monotonic()
    held = holds_for(lambda: calls.append(time.monotonic()), 0.6, "always", period=0.1)
    assert time.monotonic() - started >= 0.6
    assert held == len(calls) >= 4


def test_holds_for_fails_at_the_first_check_that_does_not_hold() -> None:
    calls = []

    def breaks_on_third() -> None:
        calls.append(1)
        assert len(calls) < 3, "the state changed"

    with pytest.raises(CheckFailed, match="stopped holding after 2 checks: the state changed"):
        holds_for(breaks_on_third, 5, "pending", period=0.01)
    assert len(calls) == 3


def test_wait_until_names_what_did_not_arrive() -> None:
    def never() -> None:
        raise AssertionError("still RUNNING")

    with pytest.raises(CheckFailed, match="retry pending: not within 0 s: still RUNNING"):
        wait_until(never, 0.3, "retry pending")
