"""Resource faults: memory held by a process inside the node, a filesystem filled up.

Both act inside the node and stay bounded by it: the allocator lives in the node's cgroup, and
a disk is filled only under a tmpfs the node's spec declared. Filling any other path would fill
the Docker host's own disk, which every cluster on the machine shares.
"""

from __future__ import annotations

import itertools
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, CheckFailed
from chaos.nemesis.base import Fault, host_up, run, sh
from chaos.nemesis.process import assert_gone
from chaos.waits import poll

if TYPE_CHECKING:
    from chaos.backends.base import Stream
    from chaos.cluster.cluster import Cluster

_fill_numbers = itertools.count(1)

# Reports its PID first (so heal can kill it by PID in the node), then allocates and touches
# every page, then says so and holds on.
_ALLOCATOR = """\
import json, os, time
def say(event):
    print('@@raychaos ' + json.dumps({'event': event, 'pid': os.getpid()}), flush=True)
say('allocating')
b = bytearray(NBYTES)
for i in range(0, len(b), 4096): b[i] = 1
say('allocated')
time.sleep(3600)
"""


@dataclass(eq=False)
class MemoryPressure(Fault):
    """A process in ``node`` that allocates and touches ``nbytes``; heal kills it."""

    node: str
    nbytes: int
    holder: Stream | None = field(default=None, init=False, repr=False)
    kind = "memory_pressure"
    verify_timeout_s = 60.0

    @property
    def target(self) -> str:
        return self.node

    @property
    def details(self) -> dict[str, Any]:
        return {"bytes": self.nbytes}

    def inject(self, cluster: Cluster) -> None:
        argv = ["python3", "-c", _ALLOCATOR.replace("NBYTES", str(int(self.nbytes)))]
        self.holder = cluster.stream(self.node, argv, source=f"pressure-{self.node}", bound_s=3600)

    def verify(self, cluster: Cluster) -> None:
        holder = self.holder
        if holder is None:
            raise CheckFailed("the allocator never started")
        if not holder.running:
            raise CheckFailed(f"the allocator ended: {holder.tail(3)}")
        if holder.pid is None:
            raise CheckFailed("the allocator has not reported its PID yet")
        status = sh(cluster, self.node, f"cat /proc/{holder.pid}/status 2>/dev/null || true")
        rss = sum(
            int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")
        )
        if rss < 0.9 * self.nbytes:
            raise CheckFailed(f"resident {rss} of {self.nbytes} bytes")

    def undo(self, cluster: Cluster) -> None:
        holder = self.holder
        if holder is None or not host_up(cluster, self.node):
            return  # never started, or ended with its host
        holder.stop()
        pid = holder.pid
        if pid is None:

            def ended() -> None:
                if holder.running:
                    raise CheckFailed("the allocator still runs")

            poll(ended, self.verify_timeout_s)
        else:
            poll(lambda: assert_gone(cluster, self.node, pid), self.verify_timeout_s)


@dataclass(eq=False)
class FillDisk(Fault):
    """Fill the tmpfs holding ``path`` up to ``fraction`` of its size; heal frees it.

    ``path`` must lie under a tmpfs the node's spec declares (``NodeSpec(tmpfs=...)``).
    """

    node: str
    path: str
    fraction: float
    file: str = field(default="", init=False)
    kind = "fill_disk"

    def __post_init__(self) -> None:
        if not 0 < self.fraction < 1:
            raise ChaosError(f"fill_disk fraction: expected 0 < f < 1, got {self.fraction}")

    @property
    def target(self) -> str:
        return self.node

    @property
    def details(self) -> dict[str, Any]:
        return {"path": self.path, "fraction": self.fraction, "file": self.file}

    def prepare(self, cluster: Cluster) -> None:
        spec = cluster.node(self.node).spec
        mounts = [posixpath.normpath(m) for m in (spec.tmpfs if spec else {})]
        path = posixpath.normpath(self.path)
        if not path.startswith("/") or not any(
            path == m or path.startswith(m.rstrip("/") + "/") for m in mounts
        ):
            raise ChaosError(
                f"fill_disk: {self.path!r} on {self.node} is not under a tmpfs its spec "
                f"declares ({', '.join(mounts) or 'none declared'})",
                hint="declare one, e.g. NodeSpec(tmpfs={'/scratch': 'size=64m'}), and fill a "
                "path under it: any other path fills the Docker host's own disk",
            )
        fstype = run(cluster, self.node, ["stat", "-f", "-c", "%T", path]).strip()
        if fstype != "tmpfs":  # e.g. a symlink out of the mount
            raise ChaosError(f"fill_disk: {path} on {self.node} is on {fstype}, not tmpfs")
        self.path = path
        self.file = posixpath.join(path, f".raychaos-fill-{next(_fill_numbers)}")

    def _sizes(self, cluster: Cluster) -> tuple[int, int]:
        out = run(cluster, self.node, ["df", "-B1", "--output=size,used", self.path])
        size, used = (int(x) for x in out.strip().splitlines()[-1].split())
        return size, used

    def inject(self, cluster: Cluster) -> None:
        size, used = self._sizes(cluster)
        need = int(size * self.fraction) - used
        if need > 0:
            run(cluster, self.node, ["fallocate", "-l", str(need), self.file])

    def verify(self, cluster: Cluster) -> None:
        size, used = self._sizes(cluster)
        if used < size * self.fraction * 0.99:
            raise CheckFailed(f"{self.path} is {used / size:.0%} full")

    def undo(self, cluster: Cluster) -> None:
        if not self.file or not host_up(cluster, self.node):
            return  # never struck, or the tmpfs went with its host
        run(cluster, self.node, ["rm", "-f", self.file])
        left = sh(cluster, self.node, f"test -e {shlex.quote(self.file)} && echo left || true")
        if "left" in left:
            raise CheckFailed(f"{self.file} is still in {self.node}")
