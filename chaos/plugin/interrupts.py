"""Ctrl-C and SIGTERM: unwind at once, skip what only a finished test needs.

Installed lazily (the first time a process connects to Docker), so the plugin stays inert
in runs that use no raychaos fixture.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType

#: Set by raychaos's SIGINT/SIGTERM handlers: teardown then skips the postconditions and
#: evidence and only removes clusters (xdist kills a worker ~10 s after an interrupt).
INTERRUPTED = threading.Event()


def install_handlers() -> None:
    """SIGINT and SIGTERM set :data:`INTERRUPTED` and unwind like Ctrl-C (KeyboardInterrupt),
    so fixture teardown still removes the clusters, at once. A handler someone else installed
    is left alone."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        INTERRUPTED.set()
        raise KeyboardInterrupt(f"signal {signum}")

    for signum, default in (
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGINT, signal.default_int_handler),
    ):
        if signal.getsignal(signum) is not default:
            continue
        with contextlib.suppress(ValueError):  # not the main thread: nothing to install
            signal.signal(signum, interrupt)
