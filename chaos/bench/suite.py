"""``raychaos bench suite RESULTS``: where a suite run's wall time went.

Read from an Allure results directory alone: each test body is its result's ``start``–``stop``
(allure-pytest times the call phase only); fixtures are the containers' ``befores`` and
``afters``; boots, the time queued for a boot slot and cluster teardowns are the ``raychaos
timing`` attachments (:mod:`chaos.report.timing`). Workers are ``xdist.workers`` from
``environment.properties``, else the distinct ``thread`` labels (one per worker process).

The overhead ratio is wall / (sum of bodies / workers): 1.0 would be a run that did nothing
but experiments, spread perfectly over its workers.

CPU (:class:`SuiteCpu`): the host's busy CPU-seconds between the controller's configure and
its session finish (``raychaos-cpu.json``, :mod:`chaos.report.hostcpu`), against that span's
wall: wall / (busy / cores) is 1.0 when every core was busy all along. The containers' own
CPU-seconds by phase (boot, body, teardown) and node are the timing attachments' ``cpu_s``.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError
from chaos.report.files import CONTAINER, read_json, read_objects
from chaos.report.hostcpu import CPU_FILE, HostCpu, read_host_cpu
from chaos.report.model import TestResult, load_results
from chaos.report.timing import PHASES, TIMING


@dataclass(frozen=True)
class NodeCpu:
    """One node's container CPU-seconds by phase in one test (None: not read)."""

    node: str
    boot: float | None = None
    body: float | None = None
    teardown: float | None = None


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
    #: The attachment it came from: one per test.
    test: str = ""
    #: Its nodes' CPU-seconds by phase; empty when not recorded.
    cpu: tuple[NodeCpu, ...] = ()


@dataclass(frozen=True)
class Body:
    name: str
    status: str
    seconds: float
    worker: str


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class SuiteCpu:
    """The run's CPU: the host's busy CPU-seconds, and the containers' by phase and node."""

    #: None: no ``raychaos-cpu.json`` in the results.
    host: HostCpu | None
    experiments: int
    clusters: tuple[Boot, ...]

    @property
    def recorded(self) -> bool:
        return self.host is not None and self.host.recorded and self.host.cores > 0

    @property
    def bound_s(self) -> float:
        """The host's busy CPU-seconds spread perfectly over its cores."""
        return self.host.busy_s / self.host.cores if self.host and self.recorded else 0.0

    @property
    def ratio(self) -> float:
        return self.host.wall_s / self.bound_s if self.host and self.bound_s > 0 else float("inf")

    @property
    def per_experiment_s(self) -> float:
        return self.host.busy_s / self.experiments if self.host and self.experiments else 0.0

    def readings(self) -> list[NodeCpu]:
        return [n for c in self.clusters for n in c.cpu]

    def phase(self, name: str) -> tuple[float, int]:
        """(CPU-seconds summed over every node of every test, readings missing) of a phase."""
        values = [getattr(n, name) for n in self.readings()]
        return sum(v for v in values if v is not None), sum(1 for v in values if v is None)

    def per_test(self) -> list[float]:
        """Each test's containers' CPU-seconds, all phases (tests with a record only)."""
        tests: dict[str, float] = {}
        for cluster in self.clusters:
            for node in cluster.cpu:
                known = (getattr(node, p) for p in PHASES)
                tests[cluster.test] = tests.get(cluster.test, 0.0) + sum(
                    v for v in known if v is not None
                )
        return list(tests.values())

    def by_node(self) -> dict[str, dict[str, float | None]]:
        """Per node name (``head``, ``worker-1``…), each phase summed over the run; None where
        that node's phase was never read (a node killed at every read of it)."""
        found: dict[str, dict[str, float | None]] = {}
        for node in self.readings():
            sums = found.setdefault(node.node, dict.fromkeys(PHASES, None))
            for name in PHASES:
                value = getattr(node, name)
                if value is not None:
                    sums[name] = (sums[name] or 0.0) + value
        return found

    def notes(self) -> list[str]:
        notes = []
        if self.host is None:
            notes.append(
                f"no {CPU_FILE}: the host's busy CPU is unknown (results of a raychaos older "
                "than the record, or a run that wrote no run files)"
            )
        elif not self.recorded:
            notes.append(f"the host's busy CPU was not recorded: {self.host.why or 'no samples'}")
        missing = sum(self.phase(name)[1] for name in PHASES)
        if missing:
            notes.append(
                f"{missing} of {len(self.readings()) * len(PHASES)} node-phase CPU readings "
                "missing (a node killed or paused at a read, or an exec failed); per-experiment "
                "sums count what was read"
            )
        without = sum(1 for c in self.clusters if c.booted and not c.cpu)
        if without:
            notes.append(f"{without} booted cluster(s) without a CPU record")
        return notes

    def to_json(self) -> dict[str, Any]:
        per_test = self.per_test()
        data: dict[str, Any] = {
            "host_recorded": self.recorded,
            "host_why": self.host.why if self.host else f"no {CPU_FILE}",
        }
        if self.host is not None and self.recorded:
            data.update(
                busy_s=round(self.host.busy_s, 2),
                cores=self.host.cores,
                bound_s=round(self.bound_s, 2),
                wall_s=round(self.host.wall_s, 2),
                wall_over_bound=round(self.ratio, 3),
                busy_per_experiment_s=round(self.per_experiment_s, 2),
            )
        data["containers"] = {
            "phases_s": {name: round(self.phase(name)[0], 2) for name in PHASES},
            "missing": {name: self.phase(name)[1] for name in PHASES},
            "per_experiment_median_s": _round(statistics.median(per_test) if per_test else None),
            "per_experiment_max_s": _round(max(per_test) if per_test else None),
            "experiments_recorded": len(per_test),
            "by_node_s": {
                node: {k: _round(v) for k, v in sums.items()}
                for node, sums in self.by_node().items()
            },
        }
        return data

    def lines(self) -> list[str]:
        def line(label: str, value: float, unit: str = "s", note: str = "") -> str:
            return f"  {label:<40}{value:9.1f} {unit}{'  ' + note if note else ''}"

        lines = []
        if self.host is not None and self.recorded:
            lines += [
                line("host busy CPU-seconds", self.host.busy_s, note="/proc/stat, session"),
                f"  {'cores':<40}{self.host.cores:9d}",
                line("CPU bound (busy / cores)", self.bound_s),
                line("wall, session start → finish", self.host.wall_s),
                f"  {'wall / CPU bound':<40}{self.ratio:9.2f}×",
                line(
                    "busy CPU-seconds per experiment",
                    self.per_experiment_s,
                    note=f"{self.experiments} experiment{_s(self.experiments)}",
                ),
            ]
        if self.readings():
            total = sum(self.phase(name)[0] for name in PHASES)
            share = (
                f"{total / self.host.busy_s:.0%} of the host's busy"
                if self.host and self.recorded and self.host.busy_s > 0
                else ""
            )
            lines.append(line("containers' CPU-seconds (cgroup), all", total, note=share))
            for name in PHASES:
                seconds, missing = self.phase(name)
                lines.append(
                    line(f"  {name}", seconds, note=f"{missing} missing" if missing else "")
                )
            per_test = self.per_test()
            lines.append(
                f"  {'  per experiment: median / max':<40}{statistics.median(per_test):9.1f} s"
                f" / {max(per_test):.1f} s  ({len(per_test)} experiment{_s(len(per_test))})"
            )
            lines.append("  containers by node (boot / body / teardown, CPU-seconds):")
            lines += [
                f"    {node:<16}"
                + " / ".join("      —" if sums[p] is None else f"{sums[p]:7.1f}" for p in PHASES)
                for node, sums in sorted(self.by_node().items())
            ]
        return lines


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
    cpu: SuiteCpu | None = None

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
            "cpu": self.cpu.to_json() if self.cpu is not None else None,
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
            *(self.cpu.lines() if self.cpu is not None else []),
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
                    test=source,
                    cpu=_node_cpu(cluster.get("cpu_s")),
                )
            )
    return boots


def _node_cpu(raw: object) -> tuple[NodeCpu, ...]:
    """The ``cpu_s`` of a cluster's timing record: node → phase → CPU-seconds or null."""
    if not isinstance(raw, Mapping):
        return ()

    def value(phases: Mapping[str, Any], name: str) -> float | None:
        found = phases.get(name)
        return float(found) if isinstance(found, int | float) else None

    return tuple(
        NodeCpu(str(node), *(value(phases, p) for p in PHASES))
        for node, phases in raw.items()
        if isinstance(phases, Mapping)
    )


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
    problems = list(results.problems)
    host = read_host_cpu(directory, problems)
    notes = [f"unreadable: {p}" for p in problems]
    boots = _boots(directory, runs)
    cpu = SuiteCpu(host, len(runs), tuple(boots))
    notes += cpu.notes()
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
        cpu=cpu,
    )
