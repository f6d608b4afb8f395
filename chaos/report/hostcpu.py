"""The machine's busy CPU over a run, as recorded in ``raychaos-cpu.json``: what ``raychaos
bench suite`` divides. This module is the record's format and its reader; the plugin takes
the samples (:mod:`chaos.plugin.results.hostcpu`).

The pytest controller (or the single process) reads the host's counters when it configures
and again at session finish; both samples and the core count go into ``raychaos-cpu.json``
in the results directory with the run-level files (:mod:`chaos.plugin.results.runfiles`). Busy is
user + nice + system + irq + softirq + steal (guest time is already inside user and nice;
idle and iowait are not busy). The counters are this machine's, so they say something only
when the clusters ran here: with an engine elsewhere the file holds only why there are none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.report.files import read_json

#: The record's file name in the results directory (Allure ignores it).
CPU_FILE = "raychaos-cpu.json"
#: Fields of the ``cpu`` line of /proc/stat, in order (proc(5)).
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BUSY = ("user", "nice", "system", "irq", "softirq", "steal")


@dataclass(frozen=True)
class HostSample:
    """The host's CPU counters at one moment, in CPU-seconds over all cores."""

    #: Unix time of the read (seconds).
    at: float
    busy_s: float
    total_s: float


@dataclass(frozen=True)
class HostCpu:
    """A run's two host samples and the core count, or why there are none."""

    cores: int
    start: HostSample | None = None
    finish: HostSample | None = None
    #: Why no samples were recorded.
    why: str = ""

    @property
    def recorded(self) -> bool:
        return self.start is not None and self.finish is not None

    @property
    def busy_s(self) -> float:
        return self.finish.busy_s - self.start.busy_s if self.start and self.finish else 0.0

    @property
    def wall_s(self) -> float:
        return self.finish.at - self.start.at if self.start and self.finish else 0.0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cores": self.cores}
        for name in ("start", "finish"):
            sample = getattr(self, name)
            if sample is not None:
                data[name] = {
                    "at": round(sample.at, 3),
                    "busy_s": round(sample.busy_s, 2),
                    "total_s": round(sample.total_s, 2),
                }
        if self.why:
            data["why"] = self.why
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostCpu:
        def sample(name: str) -> HostSample | None:
            raw = data.get(name)
            if not isinstance(raw, Mapping):
                return None
            return HostSample(float(raw["at"]), float(raw["busy_s"]), float(raw["total_s"]))

        return cls(
            cores=int(data.get("cores") or 0),
            start=sample("start"),
            finish=sample("finish"),
            why=str(data.get("why") or ""),
        )


def read_host_cpu(directory: Path, problems: list[str]) -> HostCpu | None:
    """The run's record in ``directory``; None when there is none (or it is unreadable)."""
    path = directory / CPU_FILE
    if not path.exists():
        return None
    data = read_json(path, problems)
    if not isinstance(data, Mapping):
        return None
    try:
        return HostCpu.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"{CPU_FILE}: {exc!r}")
        return None
