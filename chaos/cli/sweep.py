"""``raychaos sweep``: remove the Docker objects of runs that are provably dead."""

from __future__ import annotations

import argparse

from chaos.cli.args import age
from chaos.cli.output import note, say


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        type=age,
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


def run(args: argparse.Namespace) -> int:
    """Name what was removed, count what was kept by reason; exit 1 if a removal failed."""
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.sweep import sweep

    client = connect(url=args.docker_host) if args.docker_host else connect()
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
        say(f"removed {line}" + (f" ({why})" if why else ""))
    for line in report.failed:
        note(f"could not remove {line}")
    say(f"sweep {report}")
    if report.unproven and args.older_than is None and not (args.all or args.kept):
        host = f" --docker-host {args.docker_host}" if args.docker_host else ""
        note(
            f"{report.unproven} object(s) kept because nothing here can judge their "
            "owner (another machine's runs): never removed automatically; once those runs are "
            f"surely over: raychaos sweep{host} --older-than 2d"
        )
    return 1 if report.failed else 0
