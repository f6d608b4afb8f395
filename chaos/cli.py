"""``raychaos``: build images, sweep leftovers, benchmark boots, render reports.

Errors print as one line (``raychaos: error: …``) with what to try, and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from chaos.errors import ChaosError, SpecError
from chaos.report.cli_commands import add_commands, run_command
from chaos.spec.topology import DEFAULT_RAY_VERSION
from chaos.spec.validation import ray_version

if TYPE_CHECKING:
    from chaos.backends.docker import DockerClient


def _version(raw: str) -> str:
    try:
        ray_version(raw, "--ray-version")
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


def _python(raw: str) -> str:
    if not re.fullmatch(r"3\.\d+(?:\.\d+)?", raw):
        raise argparse.ArgumentTypeError(f"expected a Python version such as 3.11, got {raw!r}")
    return raw


def _seconds(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {raw!r}")
    return seconds


def _age(raw: str) -> float:
    from chaos.backends.docker.sweep import parse_age

    try:
        return parse_age(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raychaos", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    image = sub.add_parser("image", help="Ray node images").add_subparsers(
        dest="image_command", required=True
    )
    build = image.add_parser("build", help="build raychaos/ray:<ray>-py<python> offline")
    build.add_argument(
        "--ray-version",
        type=_version,
        action="append",
        help=f"Ray release (repeatable; default {DEFAULT_RAY_VERSION})",
    )
    build.add_argument(
        "--ray-wheel",
        type=Path,
        metavar="PATH",
        help="also build the image of a Ray wheel of your own (tagged <version>-wheel-<sha>)",
    )
    build.add_argument(
        "--python", type=_python, default="3.11", help="Python of the image (default 3.11)"
    )
    build.add_argument(
        "--base-image",
        default=None,
        help="base image with Python (default: Debian made with debootstrap)",
    )

    sweep = sub.add_parser(
        "sweep",
        help="remove Docker objects of runs that are provably dead (unknown owners are kept)",
    )
    which = sweep.add_mutually_exclusive_group()
    which.add_argument(
        "--kept",
        action="store_true",
        help="remove only the clusters kept for inspection (--raychaos-keep)",
    )
    which.add_argument(
        "--cluster", metavar="KEY", help="remove one cluster (its raychaos.cluster label)"
    )
    which.add_argument(
        "--all",
        action="store_true",
        help="remove every raychaos object: kept clusters and LIVE runs included",
    )
    which.add_argument(
        "--older-than",
        type=_age,
        metavar="DURATION",
        help="also remove objects whose owner cannot be judged from here (another machine's "
        "runs on a shared engine) once their run made nothing for DURATION (6h, 2d); an "
        "owner alive here or a kept cluster is never removed",
    )
    sweep.add_argument(
        "--docker-host",
        metavar="URL",
        help="the engine to sweep (unix://, ssh://, tcp://; default: DOCKER_HOST, else the "
        "local socket)",
    )

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(
        dest="bench_command", required=True
    )
    boot = bench.add_parser("boot", help="harness boot vs. bare docker run + ray start")
    boot.add_argument("--runs", type=int, default=5)
    boot.add_argument("--ray-version", type=_version, default=DEFAULT_RAY_VERSION)
    suite = bench.add_parser(
        "suite", help="where a suite run's wall time went, from its Allure results"
    )
    suite.add_argument("results", type=Path, help="the --alluredir of a pytest run")
    suite.add_argument("--workers", type=int, help="xdist workers (default: as recorded)")
    suite.add_argument("--json", action="store_true", help="the figures as JSON")
    procs = bench.add_parser(
        "processes", help="what each Ray process costs to start in a node (time, CPU, memory)"
    )
    procs.add_argument("--runs", type=int, default=1)
    procs.add_argument("--ray-version", type=_version, default=DEFAULT_RAY_VERSION)
    procs.add_argument("--duration", type=_seconds, default=40.0, help="seconds sampled per boot")
    procs.add_argument("--json", action="store_true", help="every process of every run")

    from chaos.report.html import REPORT_HELP

    report = sub.add_parser(
        "report",
        help="render Allure results as one self-contained HTML page (no Java/Node)",
        description=REPORT_HELP,
    )
    report.add_argument("results", type=Path, help="the --alluredir of a pytest run")
    report.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("reports/summary.html"),
        help="HTML file to write (default: reports/summary.html)",
    )
    evidence = sub.add_parser(
        "evidence",
        help="keep each run's verdict and measured values as JSON, one file per claim family",
    )
    evidence.add_argument("results", type=Path, nargs="+", help="--alluredir directories")
    evidence.add_argument(
        "--out",
        type=Path,
        default=Path("docs/evidence/data"),
        help="directory of <family>.json files to merge into (default: docs/evidence/data)",
    )
    add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so `finally` blocks remove what a command created.
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _dispatch(args)
    except ChaosError as exc:
        print(f"raychaos: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("raychaos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`raychaos claims | head`): not an error; silence the flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _dispatch(args: argparse.Namespace) -> int:
    if (code := run_command(args)) is not None:
        return code
    if args.command == "report":
        return _report(args.results, args.output)
    if args.command == "evidence":
        from chaos.report.evidence import export

        added = export(args.results, args.out)
        for family, count in added.items():
            print(f"raychaos: {args.out / (family + '.json')}: {count} new run(s)")
        return 0
    if args.command == "bench" and args.bench_command == "suite":
        from chaos.report.suite_bench import bench_suite

        found = bench_suite(args.results, args.workers)
        print(json.dumps(found.to_json(), indent=1) if args.json else found.text())
        return 0

    from chaos.backends.docker.client import connect

    if args.command == "image":
        from chaos.backends.docker.images import BuildSettings, ImageBuilder

        versions = args.ray_version or ([] if args.ray_wheel else [DEFAULT_RAY_VERSION])
        if args.ray_wheel:
            from chaos.spec.releases import provide, read_wheel

            wheel = read_wheel(args.ray_wheel, "--ray-wheel", args.python)
            provide(wheel)
            versions = [*versions, wheel.version]
        client = connect()
        builder = ImageBuilder(client, BuildSettings(base_image=args.base_image))
        for version in versions:
            print(builder.ensure(version, args.python))
        return 0
    if args.command == "sweep":
        return _sweep(connect(url=args.docker_host) if args.docker_host else connect(), args)
    if args.command == "bench":
        from chaos.backends.docker.bench import bench_boot
        from chaos.backends.docker.images import ImageBuilder

        if args.runs < 1:
            raise ChaosError(f"--runs: expected ≥ 1, got {args.runs}")
        client = connect()
        if args.bench_command == "processes":
            from chaos.backends.docker.bench_processes import bench_processes, table

            rows, runs = bench_processes(
                client,
                ImageBuilder(client),
                args.ray_version,
                args.runs,
                args.duration,
                progress=lambda line: print(line, file=sys.stderr),
            )
            text = json.dumps([[c.__dict__ for c in r] for r in runs], indent=1)
            print(text if args.json else table(rows, len(runs)))
            return 0
        result = bench_boot(client, ImageBuilder(client), args.ray_version, args.runs)
        print(result.table())
        return 0
    raise AssertionError(f"unhandled command {args.command}")  # argparse makes this unreachable


def _sweep(client: DockerClient, args: argparse.Namespace) -> int:
    """Name what was removed, count what was kept by reason; exit 1 if a removal failed."""
    from chaos.backends.docker.sweep import sweep

    report = sweep(
        client,
        everything=args.all,
        kept_only=args.kept,
        cluster=args.cluster,
        engine=args.docker_host,
        older_than=args.older_than,
    )
    for line in report.removed:
        why = report.why.get(line)
        print(f"raychaos: removed {line}" + (f" ({why})" if why else ""))
    for line in report.failed:
        print(f"raychaos: could not remove {line}", file=sys.stderr)
    print(f"raychaos: sweep {report}")
    if report.unproven and args.older_than is None and not (args.all or args.kept):
        host = f" --docker-host {args.docker_host}" if args.docker_host else ""
        print(
            f"raychaos: {report.unproven} object(s) kept because nothing here can judge their "
            "owner (another machine's runs): never removed automatically; once those runs are "
            f"surely over: raychaos sweep{host} --older-than 2d",
            file=sys.stderr,
        )
    return 1 if report.failed else 0


def _report(results: Path, output: Path) -> int:
    from chaos.report.coverage import load_raychaos
    from chaos.report.html import exit_code, write_report

    # As coverage and compare do: a directory without raychaos results is a usage error (2),
    # never an empty page that exits 0.
    loaded = write_report(results, output, loaded=load_raychaos(results))
    counts: dict[str, int] = {}
    for test in loaded.tests:
        counts[test.effective_status] = counts.get(test.effective_status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results"
    print(f"raychaos: report {output} ({summary})")
    for problem in loaded.problems:
        print(f"raychaos: warning: unreadable {problem}", file=sys.stderr)
    return exit_code(loaded)


if __name__ == "__main__":
    sys.exit(main())
