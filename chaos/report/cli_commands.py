"""``raychaos claims | coverage | compare | upgrade-check``: the claim-level commands.

:func:`add_commands` adds their parsers to ``raychaos``'s subparsers, :func:`run_command` runs
the one parsed (None: not one of these). Imports are lazy, so ``raychaos --help`` stays fast.
A :class:`~chaos.errors.ChaosError` raised here is a usage error: ``raychaos`` prints it on one
line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.errors import ChaosError, SpecError

if TYPE_CHECKING:
    from chaos.report.catalogue import Catalogue

COMMANDS = ("claims", "coverage", "compare", "upgrade-check")

COVERAGE_HELP = """\
Per claim of the catalogue and per Ray release in RESULTS: verified (passed), finding (a strict
xfail whose reason starts with FINDING:), skipped (not verified), failed/broken (a strict
xfail that passed, "finding gone", counts here until its marker is updated) or missing (no
result). Exit 0 when every claim is accounted for on every release: verified or a recorded
finding (with --strict: verified only); 1 otherwise; 2 on a usage error (RESULTS is not a
directory or holds no raychaos results)."""

COMPARE_HELP = """\
Per claim: each side's verdict and one change: regression (passed → failed or broken),
new finding, finding no longer reproduces (a recorded finding that passes, pytest's
[XPASS(strict)]: never a regression), now passes, exception changed (the exception class or
.reason in the message or measurements differs), window moved (each measured window's median
and range per side: with >= 2 trials a side, the ranges do not overlap; else the medians
differ by x2 and by >= 20 s), changed, missing on one side, unchanged. Changes come first,
then unchanged claims, then one line counting claims not run. INV-01/INV-02 are judged only
by the tests whose teardown checked them (a failed body leaves them "not judged").
With --raychaos-trials a claim's verdict is its worst trial, and a drop in passes is a
regression only beyond trial noise: every base trial passed and a candidate trial did not, or
the candidate's 95 % Wilson interval lies wholly below the base's.
Markdown on stdout, an HTML page in -o. Exit 1 on any regression, 2 on a usage error, else 0.
Two releases in one directory: `raychaos compare DIR` (when it holds exactly two; the older is
the base) or `raychaos compare DIR DIR --base-version A --candidate-version B`."""

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


def _release(raw: str) -> str:
    from chaos.spec import validation

    try:
        validation.ray_version(raw, "release")
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``claims``, ``coverage``, ``compare`` and ``upgrade-check`` to ``raychaos``."""
    claims = subparsers.add_parser("claims", help="list the claims raychaos verifies")
    claims.add_argument("patterns", nargs="*", help="ids or patterns (OBJ-*, TASK-01)")
    claims.add_argument("--json", action="store_true", help="every field, as JSON")

    cov = subparsers.add_parser(
        "coverage",
        help="which claims an Allure results directory verifies, per Ray release",
        description=COVERAGE_HELP,
    )
    cov.add_argument("results", type=Path, help="the --alluredir of a raychaos run")
    cov.add_argument(
        "--strict", action="store_true", help="require verified: a recorded finding fails too"
    )
    cov.add_argument(
        "--claims",
        metavar="PATTERNS",
        default="",
        help="only these claims (OBJ-*,TASK-01), as run with --raychaos-claims",
    )

    cmp = subparsers.add_parser(
        "compare",
        help="claim by claim, what changed between two runs or two Ray releases",
        description=COMPARE_HELP,
    )
    cmp.add_argument("base", type=Path, help="results directory of the base")
    cmp.add_argument(
        "candidate", type=Path, nargs="?", help="results directory of the candidate (default: BASE)"
    )
    cmp.add_argument("--base-version", metavar="X", help="the base's Ray release")
    cmp.add_argument("--candidate-version", metavar="Y", help="the candidate's Ray release")
    cmp.add_argument(
        "-o",
        "--output",
        type=Path,
        help="HTML page to write (default: reports/compare-X-to-Y.html)",
    )

    up = subparsers.add_parser(
        "upgrade-check",
        help="run the suite on two Ray releases and compare them claim by claim",
        description=UPGRADE_HELP,
    )
    base = up.add_mutually_exclusive_group(required=True)
    base.add_argument(
        "--from",
        dest="from_version",
        type=_release,
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
        type=_release,
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


def run_command(args: argparse.Namespace) -> int | None:
    """Run the parsed command if it is one of :data:`COMMANDS`; its exit code, else None."""
    command = getattr(args, "command", None)
    if command == "claims":
        return claims_command(args.patterns, as_json=args.json)
    if command == "coverage":
        return coverage_command(args.results, strict=args.strict, patterns=args.claims)
    if command == "compare":
        return compare_command(
            args.base, args.candidate, args.base_version, args.candidate_version, args.output
        )
    if command == "upgrade-check":
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
    return None


def _catalogue() -> Catalogue:
    from chaos.report.catalogue import load_catalogue

    return load_catalogue()


def _patterns(raw: Sequence[str]) -> list[str]:
    from chaos.settings import split_list

    return [p for item in raw for p in split_list(item)]


# -- claims ---------------------------------------------------------------------------------
def claims_command(patterns: Sequence[str], *, as_json: bool = False) -> int:
    catalogue = _catalogue()
    given = _patterns(patterns)
    if patterns and not given:
        raise ChaosError(
            "claims: expected an id or pattern such as OBJ-* or TASK-01, got "
            + shlex.join(patterns),
            hint="`raychaos claims` with no argument lists every claim",
        )
    wanted = set(catalogue.select(given)) if given else set(catalogue.ids)
    chosen = [c for c in catalogue if c.id in wanted]
    if not chosen:  # an empty catalogue: nothing to align
        print(f"0 of {len(catalogue)} claims", file=sys.stderr)
        return 0
    if as_json:
        print(json.dumps([c.to_json() for c in chosen], indent=1, ensure_ascii=False))
        return 0
    width = max(len(c.id) for c in chosen) + 2
    feature = max(len(c.feature) for c in chosen) + 2
    for claim in chosen:
        print(f"{claim.id.ljust(width)}{claim.feature.ljust(feature)}{claim.fault}")
        if claim.since or claim.scope:
            print(f"{'':{width + feature}}scope: {claim.scope_text}")
    print(f"{len(chosen)} of {len(catalogue)} claims", file=sys.stderr)
    return 0


# -- coverage -------------------------------------------------------------------------------
def coverage_command(results: Path, *, strict: bool = False, patterns: str = "") -> int:
    from chaos.report.coverage import coverage, load_raychaos, render_text

    catalogue = _catalogue()
    chosen = catalogue.select(_patterns([patterns])) if patterns.strip() else []
    cov = coverage(load_raychaos(results), catalogue, chosen)
    print(render_text(cov, strict=strict))
    return cov.exit_code(strict=strict)


# -- compare --------------------------------------------------------------------------------
def compare_command(
    base: Path,
    candidate: Path | None,
    base_version: str | None = None,
    candidate_version: str | None = None,
    output: Path | None = None,
    names: tuple[str, str] = ("", ""),
) -> int:
    import dataclasses

    from chaos.report.compare import compare, pick_sides, render_markdown
    from chaos.report.html import render_compare

    before, after = pick_sides(base, candidate, base_version, candidate_version)
    before = dataclasses.replace(before, name=names[0])
    after = dataclasses.replace(after, name=names[1])
    result = compare(before, after, _catalogue())
    print(render_markdown(result), end="")
    page = output or Path("reports") / f"compare-{before.release}-to-{after.release}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render_compare(result), encoding="utf-8")
    print(f"raychaos: compare page {page}", file=sys.stderr)
    return result.exit_code


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
    print(f"raychaos: {shlex.join(command)}", file=sys.stderr)
    code = (run or run_pytest)(command, where)
    if code not in RAN:
        print(f"raychaos: pytest exited {code} without running the suite", file=sys.stderr)
        return code
    page = results.parent / f"upgrade-{from_version}-to-{to_version}.html"
    try:
        verdict = compare_command(results, None, from_version, to_version, page)
    except ChaosError as exc:
        print(f"raychaos: cannot compare: {exc}", file=sys.stderr)
        return code or 1
    print(f"raychaos: HTML {page}", file=sys.stderr)
    print(f"raychaos: Allure results {results} (allure serve {results})", file=sys.stderr)
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
    from chaos.backends.docker.derived import derive
    from chaos.backends.docker.images import BuildSettings, ImageBuilder
    from chaos.spec.topology import DEFAULT_PYTHON

    client = connect()
    try:
        builder = ImageBuilder(client, BuildSettings(base_image=base_image))
        if side.release:
            print(
                f"raychaos: image {builder.ensure(side.release, DEFAULT_PYTHON)}", file=sys.stderr
            )
            return side.release
        probe = derive(builder, str(side.image), labels.RunIdentity().labels(purpose="probe"))
        if probe is None:
            raise ChaosError(
                f"{side.image} is an image raychaos built",
                hint="give its release with --from/--to instead",
            )
        print(f"raychaos: image {probe.describe()}", file=sys.stderr)
        if probe.missing_fault_tools:
            print(
                f"raychaos: {side.image} lacks {', '.join(probe.missing_fault_tools)}: the "
                "experiments needing them skip on this side (its pytest header names them)",
                file=sys.stderr,
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
        print(f"raychaos: {side}: {shlex.join(command)}", file=sys.stderr)
        code = (run or run_pytest)(command, where)
        if code not in RAN:
            print(
                f"raychaos: pytest exited {code} on {side} without running the suite",
                file=sys.stderr,
            )
            return code
        dirs.append(side_dir)
    page = results.parent / f"upgrade-{base.label}-to-{candidate.label}.html"
    try:
        verdict = compare_command(
            dirs[0], dirs[1], releases[0], releases[1], page, names=(str(base), str(candidate))
        )
    except ChaosError as exc:
        print(f"raychaos: cannot compare: {exc}", file=sys.stderr)
        return 1
    print(f"raychaos: HTML {page}", file=sys.stderr)
    print(f"raychaos: Allure results {dirs[0]} and {dirs[1]}", file=sys.stderr)
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
