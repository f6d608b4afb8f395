"""``raychaos upgrade-check``: build both sides' images, run the suite on each, compare.

The only command that runs pytest: it builds (or probes) the images first, so the run's timing
is the tests', then hands the results to ``raychaos compare``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.cli.args import release
from chaos.cli.output import note
from chaos.cli.report import compare_command
from chaos.errors import ChaosError

UPGRADE_HELP = """\
Builds the node images of both releases, runs the suite once with both (experiments/ when the
working directory has it, else the installed chaos.experiments), then compares them in the
results directory and writes DIR/../upgrade-FROM-to-TO.html. Arguments after `--` go to pytest
(`-- -k objects -n 2`). Exit: compare's (1 on a regression, else 0), or pytest's when it did
not run the tests (interrupted, usage error, nothing collected); 2 when --from equals --to, the
results directory given is not empty or Docker cannot build the images."""

#: pytest's exit codes after which its results mean something (all passed / some failed).
RAN = (0, 1)
#: pytest options upgrade-check gives itself.
OWNED = ("--alluredir", "--raychaos-ray-version")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser(
        "upgrade-check",
        help="run the suite on two Ray releases and compare them claim by claim",
        description=UPGRADE_HELP,
    )
    base = up.add_mutually_exclusive_group(required=True)
    base.add_argument(
        "--from",
        dest="from_version",
        type=release("release"),
        metavar="A",
        help="the Ray release upgraded from (the base)",
    )
    base.add_argument(
        "--from-image",
        metavar="IMAGE",
        help="your own image upgraded from (any image with Ray: probed, then derived)",
    )
    candidate = up.add_mutually_exclusive_group(required=True)
    candidate.add_argument(
        "--to",
        dest="to_version",
        type=release("release"),
        metavar="B",
        help="the Ray release upgraded to (the candidate)",
    )
    candidate.add_argument(
        "--to-image", metavar="IMAGE", help="your own image upgraded to (probed, then derived)"
    )
    up.add_argument(
        "--alluredir",
        type=Path,
        help="results directory, new or empty (default: reports/allure-upgrade-A-to-B, emptied "
        "first); the page is written next to it",
    )
    up.add_argument("--base-image", default=None, help="base image with Python for the builds")
    up.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then pytest arguments")


def run(args: argparse.Namespace) -> int:
    if args.from_image or args.to_image:
        return upgrade_check_sides(
            UpgradeSide(args.from_version, args.from_image),
            UpgradeSide(args.to_version, args.to_image),
            args.pytest_args,
            alluredir=args.alluredir,
            base_image=args.base_image,
        )
    return upgrade_check(
        args.from_version,
        args.to_version,
        args.pytest_args,
        alluredir=args.alluredir,
        base_image=args.base_image,
    )


# -- upgrade-check --------------------------------------------------------------------------
def default_alluredir(from_version: str, to_version: str) -> Path:
    return Path("reports") / f"allure-upgrade-{from_version}-to-{to_version}"


def suite_args(cwd: Path) -> list[str]:
    """The standard suite: the checkout's experiments/, else the installed one."""
    if (cwd / "experiments").is_dir():
        return ["experiments/"]
    return ["--pyargs", "chaos.experiments"]


def pytest_command(
    from_version: str,
    to_version: str,
    alluredir: Path,
    pytest_args: Sequence[str] = (),
    *,
    cwd: Path,
    base_image: str | None = None,
) -> list[str]:
    """``python -m pytest <suite> --raychaos-ray-version A --raychaos-ray-version B …``."""
    releases = ["--raychaos-ray-version", from_version, "--raychaos-ray-version", to_version]
    return suite_command(
        releases,
        alluredir,
        pytest_args,
        cwd=cwd,
        base_image=base_image,
        owned=set(OWNED),
        hint="give the releases as --from/--to and the results directory as --alluredir",
    )


def suite_command(
    run_on: list[str],
    alluredir: Path,
    pytest_args: Sequence[str],
    *,
    cwd: Path,
    base_image: str | None,
    owned: set[str],
    hint: str,
) -> list[str]:
    """``python -m pytest <suite> <run_on> … --alluredir DIR <pytest_args>``; the options
    upgrade-check sets itself (``owned``) are refused in ``pytest_args``."""
    extra = list(pytest_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    given = sorted({a.split("=", 1)[0] for a in extra} & owned)
    if given:
        raise ChaosError(f"upgrade-check sets {', '.join(given)} itself", hint=hint)
    image = ["--raychaos-base-image", base_image] if base_image else []
    return [
        sys.executable,
        "-m",
        "pytest",
        *suite_args(cwd),
        *run_on,
        *image,
        "--alluredir",
        str(alluredir),
        *extra,
    ]


def prepare_alluredir(alluredir: Path, *, ours: bool) -> None:
    """An empty results directory: ours (the default) is emptied, the user's must be empty."""
    if alluredir.exists() and not alluredir.is_dir():
        raise ChaosError(f"--alluredir {alluredir} is not a directory")
    if alluredir.is_dir() and any(alluredir.iterdir()):
        if not ours:
            raise ChaosError(
                f"--alluredir {alluredir} is not empty: earlier results would be compared too",
                hint="give a new or empty directory",
            )
        shutil.rmtree(alluredir)
    alluredir.mkdir(parents=True, exist_ok=True)


def build_images(from_version: str, to_version: str, base_image: str | None) -> None:
    """Both releases' node images, built before the run so its timing is the tests'."""
    for version in (from_version, to_version):
        prepare_side(UpgradeSide(release=version), base_image)


def run_pytest(command: list[str], cwd: Path) -> int:
    return subprocess.call(command, cwd=cwd)


def upgrade_check(
    from_version: str,
    to_version: str,
    pytest_args: Sequence[str] = (),
    *,
    alluredir: Path | None = None,
    base_image: str | None = None,
    cwd: Path | None = None,
    build: Callable[[str, str, str | None], None] | None = None,
    run: Callable[[list[str], Path], int] | None = None,
) -> int:
    """Build, run both releases in one pytest session, compare; see :data:`UPGRADE_HELP`."""
    if from_version == to_version:
        raise ChaosError(f"--from and --to are both {from_version}: an upgrade needs two releases")
    where = (cwd or Path.cwd()).resolve()
    results = where / (alluredir or default_alluredir(from_version, to_version))
    prepare_alluredir(results, ours=alluredir is None)
    (build or build_images)(from_version, to_version, base_image)
    command = pytest_command(
        from_version, to_version, results, pytest_args, cwd=where, base_image=base_image
    )
    note(f"{shlex.join(command)}")
    code = (run or run_pytest)(command, where)
    if code not in RAN:
        note(f"pytest exited {code} without running the suite")
        return code
    page = results.parent / f"upgrade-{from_version}-to-{to_version}.html"
    try:
        verdict = compare_command(results, None, from_version, to_version, page)
    except ChaosError as exc:
        note(f"cannot compare: {exc}")
        return code or 1
    note(f"HTML {page}")
    note(f"Allure results {results} (allure serve {results})")
    return verdict


# -- upgrade-check between images -------------------------------------------------------------
@dataclass(frozen=True)
class UpgradeSide:
    """One side of an upgrade: a Ray release raychaos builds, or a team's own image."""

    release: str | None = None
    image: str | None = None

    @property
    def label(self) -> str:
        """A file-name-safe name of the side (results directory, page)."""
        return self.release or re.sub(r"[^A-Za-z0-9_.-]+", "_", self.image or "")

    def pytest_args(self) -> list[str]:
        if self.image:
            return ["--raychaos-image", self.image]
        return ["--raychaos-ray-version", str(self.release)]

    def __str__(self) -> str:
        return f"image {self.image}" if self.image else f"Ray {self.release}"


def prepare_side(side: UpgradeSide, base_image: str | None) -> str:
    """Build a release's image, or probe a team's image (deriving its node image); the
    side's Ray release. A bad image is one line here, before any pytest session."""
    from chaos import labels
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.images import BuildSettings, ImageBuilder
    from chaos.backends.docker.images.derived import derive
    from chaos.spec.topology import DEFAULT_PYTHON

    client = connect()
    try:
        builder = ImageBuilder(client, BuildSettings(base_image=base_image))
        if side.release:
            note(f"image {builder.ensure(side.release, DEFAULT_PYTHON)}")
            return side.release
        probe = derive(builder, str(side.image), labels.RunIdentity().labels(purpose="probe"))
        if probe is None:
            raise ChaosError(
                f"{side.image} is an image raychaos built",
                hint="give its release with --from/--to instead",
            )
        note(f"image {probe.describe()}")
        if probe.missing_fault_tools:
            note(
                f"{side.image} lacks {', '.join(probe.missing_fault_tools)}: the "
                "experiments needing them skip on this side (its pytest header names them)"
            )
        return probe.ray_version
    finally:
        client.close()


def upgrade_check_sides(
    base: UpgradeSide,
    candidate: UpgradeSide,
    pytest_args: Sequence[str] = (),
    *,
    alluredir: Path | None = None,
    base_image: str | None = None,
    cwd: Path | None = None,
    prepare: Callable[[UpgradeSide, str | None], str] | None = None,
    run: Callable[[list[str], Path], int] | None = None,
) -> int:
    """Probe or build both sides, one pytest session per side (an image is one node image,
    and two images may hold the same release), then compare the two results directories."""
    if base == candidate:
        raise ChaosError(f"--from and --to are both {base}: an upgrade needs two sides")
    where = (cwd or Path.cwd()).resolve()
    results = where / (alluredir or default_alluredir(base.label, candidate.label))
    prepare_alluredir(results, ours=alluredir is None)
    releases = [(prepare or prepare_side)(side, base_image) for side in (base, candidate)]
    dirs = []
    for side, name in ((base, "base"), (candidate, "candidate")):
        side_dir = results / name
        side_dir.mkdir()
        command = _side_command(side, side_dir, pytest_args, where, base_image)
        note(f"{side}: {shlex.join(command)}")
        code = (run or run_pytest)(command, where)
        if code not in RAN:
            note(f"pytest exited {code} on {side} without running the suite")
            return code
        dirs.append(side_dir)
    page = results.parent / f"upgrade-{base.label}-to-{candidate.label}.html"
    try:
        verdict = compare_command(
            dirs[0], dirs[1], releases[0], releases[1], page, names=(str(base), str(candidate))
        )
    except ChaosError as exc:
        note(f"cannot compare: {exc}")
        return 1
    note(f"HTML {page}")
    note(f"Allure results {dirs[0]} and {dirs[1]}")
    return verdict


def _side_command(
    side: UpgradeSide,
    alluredir: Path,
    pytest_args: Sequence[str],
    cwd: Path,
    base_image: str | None,
) -> list[str]:
    return suite_command(
        side.pytest_args(),
        alluredir,
        pytest_args,
        cwd=cwd,
        base_image=base_image,
        owned={*OWNED, "--raychaos-image"},
        hint="give the sides as --from/--from-image and --to/--to-image",
    )
