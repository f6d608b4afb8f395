"""Bounded waits (tenacity): a check retried until it holds, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from chaos.errors import CheckFailed
from chaos.steps import seconds, step


def poll(check: Callable[[], None], timeout: float, period: float = 0.25) -> None:
    """Retry ``check`` (which raises AssertionError, e.g. :class:`~chaos.errors.CheckFailed`,
    until it holds) for at most ``timeout``."""
    for attempt in Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(period),
        retry=retry_if_exception_type(AssertionError),
        reraise=True,
    ):
        with attempt:
            check()


def wait_until(check: Callable[[], None], timeout: float, what: str) -> float:
    """Poll ``check`` until it holds; return the seconds it took (for windows in the report).

    One Allure step, "wait: <what> ≤ <timeout>", failed when the wait ran out.
    """
    started = time.monotonic()
    with step(f"wait: {what} ≤ {seconds(timeout)}"):
        try:
            poll(check, timeout)
        except AssertionError as exc:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s: {exc}") from None
    return time.monotonic() - started


def holds_for(check: Callable[[], None], duration: float, what: str, period: float = 0.5) -> int:
    """Run ``check`` every ``period`` for ``duration``: a state that must *stay*, not arrive.

    Raises :class:`~chaos.errors.CheckFailed` at the first failure; returns how many times the
    check held. One Allure step, "hold: <what> for <duration>".
    """
    held = 0

    def keeps() -> None:
        nonlocal held
        check()
        held += 1
        raise _Again  # retried until the duration is spent

    with step(f"hold: {what} for {seconds(duration)}"):
        try:
            for attempt in Retrying(
                stop=stop_after_delay(duration),
                wait=wait_fixed(period),
                retry=retry_if_exception_type(_Again),
                reraise=True,
            ):
                with attempt:
                    keeps()
        except _Again:
            return held
        except AssertionError as exc:
            raise CheckFailed(f"{what}: stopped holding after {held} checks: {exc}") from None
    return held


class _Again(Exception):
    """Internal: the check held; go on until the duration is spent."""
