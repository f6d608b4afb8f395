"""The build lock: one process (of every xdist worker, every run on the host) builds an image.

The others wait, bounded by the longest build they may be waiting for; the OS drops the lock
when its holder dies, so only a live but hung holder makes the wait expire.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from chaos.backends.docker.images.base import DEBOOTSTRAP_TIMEOUT_S, TAR_TIMEOUT_S
from chaos.backends.docker.images.dockerbuild import DOCKER_BUILD_TIMEOUT_S
from chaos.backends.docker.images.settings import Progress
from chaos.backends.docker.images.transfer import TRANSFER_TIMEOUT_S
from chaos.backends.docker.images.wheelhouse import PIP_DOWNLOAD_TIMEOUT_S
from chaos.errors import ImageBuildError

#: The longest a process waits for another's build lock: the longest build it may wait for
#: (a transfer that fails, then base image, wheelhouse, docker build, one after the other) plus
#: 5 min for `docker import` and the daemon's slack. A holder that hangs longer is hung: its
#: own bounds have expired.
LOCK_WAIT_S = (
    TRANSFER_TIMEOUT_S
    + DEBOOTSTRAP_TIMEOUT_S
    + TAR_TIMEOUT_S
    + PIP_DOWNLOAD_TIMEOUT_S
    + DOCKER_BUILD_TIMEOUT_S
    + 300.0
)

#: How long a process waits for the lock before it says so.
QUIET_WAIT_S = 10.0


@contextlib.contextmanager
def build_lock(cache_dir: Path, tag: str, progress: Progress) -> Iterator[None]:
    """Hold the build lock of ``tag`` (a file under ``cache_dir/locks``) for the block."""
    from filelock import FileLock, Timeout

    lock_dir = cache_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{tag.replace('/', '_').replace(':', '_')}.lock"
    lock = FileLock(str(path))
    try:
        # Parallel workers check a cached image in turn, each in well under a second: only a
        # wait longer than that (another process building) is worth a line.
        lock.acquire(timeout=QUIET_WAIT_S)
    except Timeout:
        progress(f"waiting for another process building {tag} (≤ {LOCK_WAIT_S:.0f} s)")
        try:
            lock.acquire(timeout=LOCK_WAIT_S)
        except Timeout:
            raise ImageBuildError(
                f"build lock of {tag}: another process held it for more than "
                f"{LOCK_WAIT_S:.0f} s (longer than any bounded build step may take)",
                hint=f"find the holder with `fuser -v {path}` and stop it if it is hung, "
                "then run again (`raychaos image build` builds without a test run)",
            ) from None
    try:
        yield
    finally:
        lock.release()
