"""The machine's busy CPU over a run, sampled from ``/proc/stat`` when the pytest controller
(or the single process) configures and at session finish; written as
:class:`chaos.report.hostcpu.HostCpu` (the record's format and reader). Busy is user + nice +
system + irq + softirq + steal (guest time is already inside user and nice; idle and iowait
are not busy). The counters are this machine's, so they say something only when the clusters
ran here: with an engine elsewhere the record holds only why there are none.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from chaos.report.hostcpu import BUSY, FIELDS, HostCpu, HostSample


def parse_proc_stat(text: str, hz: int) -> tuple[float, float]:
    """(busy, total) CPU-seconds of the aggregate ``cpu`` line; ``hz`` is USER_HZ."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = dict(zip(FIELDS, (int(v) for v in parts[1 : 1 + len(FIELDS)]), strict=False))
            busy = sum(values.get(f, 0) for f in BUSY)
            return busy / hz, sum(values.values()) / hz
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def sample_host(path: Path = Path("/proc/stat")) -> HostSample | None:
    """This machine's counters now; None where there is no /proc/stat (not Linux)."""
    try:
        hz = os.sysconf("SC_CLK_TCK")
        busy, total = parse_proc_stat(path.read_text(encoding="ascii"), hz)
    except (OSError, ValueError, AttributeError):
        return None
    return HostSample(at=time.time(), busy_s=busy, total_s=total)


def not_local(engines: Sequence[str]) -> str | None:
    """Why this machine's counters do not count the clusters' work (None: they do).

    ``engines`` are the run's engine URLs; an empty one is the local socket.
    """
    remote = [url for url in engines if url and not url.startswith(("unix://", "npipe://"))]
    if remote:
        return f"the engine is not this machine ({', '.join(remote)})"
    return None


def host_cpu(start: HostSample | None, engines: Sequence[str]) -> HostCpu:
    """The record at session finish: ``start`` from configure, the finish read now."""
    cores = os.cpu_count() or 0
    why = not_local(engines)
    if why:
        return HostCpu(cores, why=why)
    if start is None:
        return HostCpu(cores, why="no /proc/stat sample at session start")
    finish = sample_host()
    if finish is None:
        return HostCpu(cores, why="no /proc/stat sample at session finish")
    return HostCpu(cores, start, finish)
