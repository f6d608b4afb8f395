"""How long a container's processes waited for a CPU: its cgroup's pressure stall information.

Linux accounts, per cgroup, the wall time during which *all* of its runnable tasks waited for
a CPU (``cpu.pressure``, the ``full`` line's ``total=`` in microseconds; PSI, kernel 5.13+ for
a cgroup's CPU ``full``; older kernels give only ``some``, which is read instead): the node
could make no progress at all. That is the measure of a host too busy to judge — a raylet
that misses its health checks because it was not scheduled, not because Ray is wrong — and
not of a node busy with its own work: ``some`` (at least one task waiting) also counts a
node's own workers queueing behind each other (measured on a churn cluster: ``some`` 36 %
where ``full`` was 22 %).

Read on the engine's host from the container's cgroup in the unified hierarchy — there is no
such file inside a container on a cgroup-v1 (hybrid) engine, which is what this machine has —
so it needs the engine on this host. The path is taken from ``/proc/<pid>/cgroup`` of the
container's init process and must name the container's id: for a remote engine (its PIDs are
not ours) the reading is None, and nothing is judged inconclusive for want of a measurement.
A read costs a few microseconds (one small file), so a sampler can afford one per second.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

#: Where the unified (cgroup v2) hierarchy is mounted: v2 hosts, then v1 hybrid hosts.
UNIFIED_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


def pressure_file(pid: int, container_id: str, proc: Path = Path("/proc")) -> Path | None:
    """The ``cpu.pressure`` file of the cgroup holding ``pid``, if that cgroup is the
    container's (its path names ``container_id``) and the file exists; else None."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = next((line[3:] for line in lines if line.startswith("0::")), None)
    if not unified or container_id[:12] not in unified:
        return None
    for root in UNIFIED_ROOTS:
        path = root / unified.lstrip("/") / "cpu.pressure"
        if path.is_file():
            return path
    return None


def parse_stall_total(text: str) -> float | None:
    """Seconds from the ``full … total=<µs>`` line of a ``cpu.pressure`` file (the ``some``
    line's where the kernel gives no ``full``)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split()
        for field in fields[1:] if fields else ():
            key, _, value = field.partition("=")
            if key == "total" and value.isdigit():
                totals[fields[0]] = int(value) / 1e6
    return totals.get("full", totals.get("some"))


def stalled_seconds(path: Path) -> float | None:
    """The cgroup's cumulative CPU stall (``full``) in seconds; None once it is gone."""
    try:
        return parse_stall_total(path.read_text())
    except OSError:
        return None


class PressureFiles:
    """Each node's ``cpu.pressure`` file, found once per container start."""

    def __init__(self) -> None:
        self._files: dict[str, Path] = {}

    def read(self, node: str, container: Any) -> float | None:
        """``node``'s stall seconds so far (``container``: its docker-py object); None when
        it cannot be read. Never raises."""
        if container is None:
            return None
        path = self._files.get(node)
        value = stalled_seconds(path) if path is not None else None
        if value is None:  # not found yet, or the cgroup went with a restart: look again
            with contextlib.suppress(Exception):  # gone or paused: the figure is missing
                container.reload()
                pid = int(container.attrs["State"]["Pid"] or 0)
                path = pressure_file(pid, str(container.id)) if pid else None
                if path is not None:
                    self._files[node] = path
                    value = stalled_seconds(path)
        return value
