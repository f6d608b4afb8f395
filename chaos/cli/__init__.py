"""``raychaos``: build images, sweep leftovers, benchmark boots, render reports.

Errors print as one line (``raychaos: error: …``) with what to try, and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from chaos.cli import bench, images, report, sweep, upgrade
from chaos.cli.output import note
from chaos.errors import ChaosError

#: What ``raychaos --help`` says first: plain words (the module's docstring is reST).
HELP = (
    "raychaos: build images, sweep leftovers, benchmark boots, render reports. Errors print "
    "as one line (raychaos: error: ...) with what to try, and exit 2."
)

#: Every command, by its name and sub-command name: the one place a parsed command is run.
#: Each module imports what it needs when it runs, so ``raychaos --help`` stays fast.
COMMANDS: dict[tuple[str, ...], Callable[[argparse.Namespace], int]] = {
    ("image", "build"): images.build,
    ("sweep",): sweep.run,
    ("bench", "boot"): bench.boot,
    ("bench", "processes"): bench.processes,
    ("bench", "suite"): bench.suite,
    ("bench", "nights"): bench.nights,
    ("report",): report.report,
    ("evidence",): report.evidence,
    ("claims",): report.claims,
    ("coverage",): report.coverage,
    ("compare",): report.compare,
    ("upgrade-check",): upgrade.run,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raychaos", description=HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (images, sweep, bench, report, upgrade):
        group.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so `finally` blocks remove what a command created.
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _dispatch(args)
    except ChaosError as exc:
        note(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        note("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`raychaos claims | head`): not an error; silence the flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _dispatch(args: argparse.Namespace) -> int:
    sub = getattr(args, f"{args.command}_command", None)
    return COMMANDS[(args.command, sub) if sub else (args.command,)](args)
