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
