"""A machine-wide limit on clusters booting at once, across xdist workers and pytest runs.

Why: every Ray node starts several Python processes (dashboard agent, runtime-env agent, log
monitor; on the head also the dashboard and the autoscaler monitor), and the raylet aborts
("Timed out waiting for file .../dashboard_agent_listen_port_<id>") when its dashboard agent has
not written its port file within a hard-coded 15 s (``WaitForPersistedPort`` in Ray's
node_manager.cc; no knob). Four 5-node clusters booting together on 2 cores starve those
imports past 15 s: in our stress run every one of them lost a node. Booting fewer at a time is
faster overall than booting all and retrying.

Slots are lock files in the cache directory; the OS drops a lock when its process dies, so a
killed run never holds a slot.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import filelock
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from chaos.errors import ClusterBootTimeout

#: How long a cluster may queue for a slot before the run is declared stuck.
MAX_QUEUE_S = 1800.0


def default_slots() -> int:
    """One booting cluster per two cores (at least one)."""
    return max(1, (os.cpu_count() or 2) // 2)


@contextlib.contextmanager
def boot_slot(directory: Path, slots: int, max_queue_s: float = MAX_QUEUE_S) -> Iterator[float]:
    """Hold one of ``slots`` boot slots; yields the seconds spent queueing for it."""
    directory.mkdir(parents=True, exist_ok=True)
    locks = [filelock.FileLock(str(directory / f"boot-slot-{i}.lock")) for i in range(slots)]
    started = time.monotonic()

    def take_one() -> filelock.BaseFileLock:
        for lock in locks:
            with contextlib.suppress(filelock.Timeout):
                lock.acquire(timeout=0)
                return lock
        raise filelock.Timeout(str(directory))

    try:
        held = Retrying(
            retry=retry_if_exception_type(filelock.Timeout),
            wait=wait_fixed(0.25),
            stop=stop_after_delay(max_queue_s),
            reraise=True,
        )(take_one)
    except filelock.Timeout:
        raise ClusterBootTimeout(
            f"waited {max_queue_s:.0f} s for one of {slots} boot slot(s) in {directory}: "
            "other clusters on this machine kept booting",
            hint="raise --raychaos-boot-slots, or run fewer xdist workers",
        ) from None
    try:
        yield time.monotonic() - started
    finally:
        held.release()
