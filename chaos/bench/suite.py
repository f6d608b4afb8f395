"""``raychaos bench suite RESULTS``: where a suite run's wall time went.

Read from an Allure results directory alone: each test body is its result's ``start``–``stop``
(allure-pytest times the call phase only); fixtures are the containers' ``befores`` and
``afters``; boots, the time queued for a boot slot and cluster teardowns are the ``raychaos
timing`` attachments (:mod:`chaos.report.timing`). Workers are ``xdist.workers`` from
``environment.properties``, else the distinct ``thread`` labels (one per worker process).

The overhead ratio is wall / (sum of bodies / workers): 1.0 would be a run that did nothing
but experiments, spread perfectly over its workers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError
from chaos.report.files import CONTAINER, read_json, read_objects
from chaos.report.model import TestResult, load_results
from chaos.report.timing import TIMING


@dataclass(frozen=True)
class Boot:
    """One cluster of one test, as its timing attachment tells it."""

    cluster: str
    booted: bool
    queued_s: float = 0.0
    boot_s: float = 0.0
    #: The whole start: images checked, network created, queued, booted.
    start_s: float = 0.0
    teardown_s: float = 0.0
    #: Booted while the previous test ran (:mod:`chaos.plugin.boot_ahead`); the test waited only
    #: ``waited_s`` for it.
    ahead: bool = False
    waited_s: float = 0.0


@dataclass(frozen=True)
class Body:
    name: str
    status: str
    seconds: float
    worker: str


@dataclass
class SuiteBench:
    directory: Path
    wall_s: float
    workers: int
    #: Where the worker count came from.
    workers_from: str
    bodies: list[Body]
    boots: list[Boot]
    setup_s: float
    teardown_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def body_s(self) -> float:
        return sum(b.seconds for b in self.bodies)

    @property
    def ideal_s(self) -> float:
        """The bodies spread perfectly over the workers."""
        return self.body_s / max(1, self.workers)

    @property
    def ratio(self) -> float:
        return self.wall_s / self.ideal_s if self.ideal_s > 0 else float("inf")

    def total(self, what: str) -> float:
        return float(sum(getattr(b, what) for b in self.boots))

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "wall_s": round(self.wall_s, 2),
            "workers": self.workers,
            "workers_from": self.workers_from,
            "tests": len(self.bodies),
            "body_s": round(self.body_s, 2),
            "overhead_ratio": round(self.ratio, 3),
            "boots": len(self.boots),
            "booted": sum(1 for b in self.boots if b.booted),
            "queued_s": round(self.total("queued_s"), 2),
            "boot_s": round(self.total("boot_s"), 2),
            "start_s": round(self.total("start_s"), 2),
            "teardown_clusters_s": round(self.total("teardown_s"), 2),
            "booted_ahead": sum(1 for b in self.boots if b.ahead),
            "waited_for_ahead_s": round(self.total("waited_s"), 2),
            "fixture_setup_s": round(self.setup_s, 2),
            "fixture_teardown_s": round(self.teardown_s, 2),
            "bodies": [
                {"name": b.name, "status": b.status, "seconds": round(b.seconds, 2)}
                for b in self.bodies
            ],
            "notes": self.notes,
        }

    def text(self) -> str:
        def line(label: str, seconds: float, note: str = "") -> str:
            return f"  {label:<40}{seconds:9.1f} s{'  ' + note if note else ''}"

        starting = self.total("start_s") - self.total("queued_s") - self.total("boot_s")
        lines = [
            f"raychaos bench suite {self.directory}",
            f"  tests: {len(self.bodies)}; workers: {self.workers} ({self.workers_from})",
            line("wall time", self.wall_s, "first fixture set-up → last teardown"),
            f"  {'cluster boots':<40}{len(self.boots):9d}"
            f"    ({sum(1 for b in self.boots if b.booted)} became ready)",
            line("  queued for a boot slot", self.total("queued_s")),
            line("  booting (slot held → all ALIVE)", self.total("boot_s")),
            line("  images and network before the slot", max(0.0, starting)),
            f"  {'  booted ahead (during the previous test)':<40}"
            f"{sum(1 for b in self.boots if b.ahead):9d}",
            line("  tests waiting for those", self.total("waited_s")),
            line("tearing clusters down", self.total("teardown_s")),
            line("fixture set-up, all", self.setup_s, "boots included"),
            line("fixture teardown, all", self.teardown_s, "cluster removal included"),
            line("experiment bodies, sum", self.body_s),
            line("bodies / workers", self.ideal_s),
            f"  {'overhead ratio wall / (bodies / workers)':<40}{self.ratio:9.2f}×",
            "  bodies (longest first):",
        ]
        lines += [
            f"    {b.seconds:8.1f} s  {b.status:<8} {b.worker:<10} {b.name}"
            for b in sorted(self.bodies, key=lambda b: -b.seconds)
        ]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fixture_spans(directory: Path) -> tuple[list[tuple[int, int]], float, float]:
    """(start, stop) of every fixture phase, and the set-up and teardown seconds summed."""
    spans: list[tuple[int, int]] = []
    totals = {"befores": 0.0, "afters": 0.0}
    # An unreadable container is already among load_results' problems (the bench's notes).
    for container in read_objects(directory, CONTAINER, []):
        for phase in totals:
            for fixture in container.get(phase) or []:
                start, stop = int(fixture.get("start") or 0), int(fixture.get("stop") or 0)
                if start and stop >= start:
                    spans.append((start, stop))
                    totals[phase] += (stop - start) / 1000
    return spans, totals["befores"], totals["afters"]


def _boots(directory: Path, tests: Iterable[TestResult]) -> list[Boot]:
    sources = dict.fromkeys(a.source for t in tests for a in t.attachments if a.name == TIMING)
    boots: list[Boot] = []
    for source in sources:
        data = read_json(directory / source, [])
        for cluster in (data or {}).get("clusters", []) if isinstance(data, dict) else []:

            def seconds(key: str, cluster: Mapping[str, Any] = cluster) -> float:
                value = cluster.get(key)
                return float(value) if isinstance(value, int | float) else 0.0

            boots.append(
                Boot(
                    cluster=str(cluster.get("cluster", "?")),
                    booted=bool(cluster.get("booted")),
                    queued_s=seconds("queued_s"),
                    boot_s=seconds("boot_s"),
                    start_s=seconds("start_s"),
                    teardown_s=seconds("teardown_s"),
                    ahead=bool(cluster.get("ahead")),
                    waited_s=seconds("waited_s"),
                )
            )
    return boots


def _workers(environment: Mapping[str, str], tests: Iterable[TestResult]) -> tuple[int, str]:
    found = re.match(r"\s*(\d+)", environment.get("xdist.workers", ""))
    if found:
        return max(1, int(found.group(1))), "environment.properties xdist.workers"
    threads = {v for t in tests for n, v in t.labels if n == "thread"}
    return max(1, len(threads)), f"{len(threads)} distinct thread label(s)"


def _worker_of(test: TestResult) -> str:
    thread = next((v for n, v in test.labels if n == "thread"), "")
    return thread.split("-", 1)[0] if thread else "?"


def bench_suite(directory: Path, workers: int | None = None) -> SuiteBench:
    """The breakdown of the run whose Allure results are in ``directory``."""
    results = load_results(directory)
    runs = results.runs or results.tests
    if not runs:
        raise ChaosError(
            f"{directory} holds no Allure results",
            hint="run pytest with --alluredir=DIR first, then `raychaos bench suite DIR`",
        )
    spans, setup_s, teardown_s = _fixture_spans(directory)
    spans += [(t.start, t.stop) for t in runs if t.start and t.stop >= t.start]
    wall_s = (max(s for _, s in spans) - min(s for s, _ in spans)) / 1000
    counted, source = _workers(results.environment, runs)
    if workers is not None:
        counted, source = workers, "--workers"
    bodies = [
        Body(t.name, t.effective_status, max(0, t.stop - t.start) / 1000, _worker_of(t))
        for t in runs
    ]
    notes = [f"unreadable: {p}" for p in results.problems]
    boots = _boots(directory, runs)
    if not boots:
        notes.append(
            f"no '{TIMING}' attachments: boot, slot and teardown times unknown "
            "(results of a raychaos older than the timing record, or no cluster tests)"
        )
    return SuiteBench(
        directory=directory,
        wall_s=wall_s,
        workers=counted,
        workers_from=source,
        bodies=bodies,
        boots=boots,
        setup_s=setup_s,
        teardown_s=teardown_s,
        notes=notes,
    )
