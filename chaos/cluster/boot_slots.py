"""A machine-wide limit on clusters booting at once, across xdist workers and pytest runs.

Why: the raylet aborts when its dashboard agent has not written its port file within a
hard-coded 15 s (Ray's node_manager.cc, no knob), and several clusters booting together on a
few cores starve those Python imports past it. Booting fewer at a time is faster overall than
booting all and retrying (the measurements are in docs/performance.md).

Slots are lock files in the cache directory, so a killed run never holds one. They are counted
per engine, from that engine's CPUs, in a directory keyed by the engine's ID: every process
booting on one engine queues for the same slots, and engines never wait for each other.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

import filelock
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from chaos.errors import ClusterBootTimeout

#: How long a cluster may queue for a slot before the run is declared stuck.
MAX_QUEUE_S = 1800.0


#: The engine ID whose slots a boot takes ("" = this machine's), set by :func:`engine_scope`.
_ENGINE: ContextVar[str] = ContextVar("raychaos_boot_engine", default="")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def slots_for_cpus(cpus: int) -> int:
    """One booting cluster per two cores (at least one)."""
    return max(1, cpus // 2)


def default_slots() -> int:
    """One booting cluster per two cores of this machine (at least one)."""
    return slots_for_cpus(os.cpu_count() or 2)


@contextlib.contextmanager
def engine_scope(engine_id: str) -> Iterator[None]:
    """Boots inside this block take the slots of the engine ``engine_id``."""
    token = _ENGINE.set(engine_id)
    try:
        yield
    finally:
        _ENGINE.reset(token)


def slot_directory(directory: Path, engine_id: str) -> Path:
    """Where the slot locks of ``engine_id`` live (``directory`` itself for no engine)."""
    if not engine_id:
        return directory
    return directory / ("engine-" + _UNSAFE.sub("-", engine_id).strip("-"))


@contextlib.contextmanager
def boot_slot(
    directory: Path,
    slots: int,
    max_queue_s: float = MAX_QUEUE_S,
    engine_id: str | None = None,
) -> Iterator[float]:
    """Hold one of ``slots`` boot slots; yields the seconds spent queueing for it.

    The slots are those of ``engine_id`` (default: the :func:`engine_scope` in effect).
    """
    engine_id = _ENGINE.get() if engine_id is None else engine_id
    directory = slot_directory(directory, engine_id)
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
        where = f"engine {engine_id}" if engine_id else "this machine"
        raise ClusterBootTimeout(
            f"waited {max_queue_s:.0f} s for one of {slots} boot slot(s) in {directory}: "
            f"other clusters on {where} kept booting",
            hint="raise --raychaos-boot-slots, or run fewer xdist workers",
        ) from None
    try:
        yield time.monotonic() - started
    finally:
        held.release()
