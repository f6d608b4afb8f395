"""``raychaos bench boot | processes | suite``: what the harness and a suite run cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chaos.cli.args import release, seconds
from chaos.cli.output import err, out
from chaos.errors import ChaosError
from chaos.spec.topology import DEFAULT_RAY_VERSION


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench_command", required=True
    )
    boot = bench.add_parser("boot", help="harness boot vs. bare docker run + ray start")
    boot.add_argument("--runs", type=int, default=5)
    boot.add_argument("--ray-version", type=release("--ray-version"), default=DEFAULT_RAY_VERSION)
    suite = bench.add_parser(
        "suite", help="where a suite run's wall time went, from its Allure results"
    )
    suite.add_argument("results", type=Path, help="the --alluredir of a pytest run")
    suite.add_argument("--workers", type=int, help="xdist workers (default: as recorded)")
    suite.add_argument("--json", action="store_true", help="the figures as JSON")
    nights = bench.add_parser(
        "nights",
        help="flake accounting: per claim, passed / failed / finding / inconclusive over runs",
    )
    nights.add_argument(
        "results", type=Path, nargs="+", help="the --alluredir of each run, oldest first"
    )
    nights.add_argument("--json", action="store_true", help="the counts as JSON")
    procs = bench.add_parser(
        "processes", help="what each Ray process costs to start in a node (time, CPU, memory)"
    )
    procs.add_argument("--runs", type=int, default=1)
    procs.add_argument("--ray-version", type=release("--ray-version"), default=DEFAULT_RAY_VERSION)
    procs.add_argument("--duration", type=seconds, default=40.0, help="seconds sampled per boot")
    procs.add_argument("--json", action="store_true", help="every process of every run")


def suite(args: argparse.Namespace) -> int:
    from chaos.bench.suite import bench_suite

    found = bench_suite(args.results, args.workers)
    out(json.dumps(found.to_json(), indent=1) if args.json else found.text())
    return 0


def nights(args: argparse.Namespace) -> int:
    from chaos.bench.nights import bench_nights
    from chaos.report.catalogue import load_catalogue

    found = bench_nights(args.results, load_catalogue())
    out(json.dumps(found.to_json(), indent=1) if args.json else found.text())
    return 0


def boot(args: argparse.Namespace) -> int:
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.images import ImageBuilder
    from chaos.bench.boot import bench_boot

    _runs(args)
    client = connect()
    result = bench_boot(client, ImageBuilder(client), args.ray_version, args.runs, progress=out)
    out(result.table())
    return 0


def processes(args: argparse.Namespace) -> int:
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.images import ImageBuilder
    from chaos.bench.processes import bench_processes, table

    _runs(args)
    client = connect()
    rows, runs = bench_processes(
        client, ImageBuilder(client), args.ray_version, args.runs, args.duration, progress=err
    )
    text = json.dumps([[c.__dict__ for c in r] for r in runs], indent=1)
    out(text if args.json else table(rows, len(runs)))
    return 0


def _runs(args: argparse.Namespace) -> None:
    if args.runs < 1:
        raise ChaosError(f"--runs: expected ≥ 1, got {args.runs}")
