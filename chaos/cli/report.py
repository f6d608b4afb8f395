"""``raychaos report | evidence | claims | coverage | compare``: what Allure results say.

These commands only read results and the catalogue (:mod:`chaos.report`); none needs Docker.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.cli.output import err, note, out, say
from chaos.errors import ChaosError

if TYPE_CHECKING:
    from chaos.report.catalogue import Catalogue

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


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    _claims_file(report)
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

    claims = sub.add_parser("claims", help="list the claims raychaos verifies")
    claims.add_argument("patterns", nargs="*", help="ids or patterns (OBJ-*, TASK-01)")
    claims.add_argument("--json", action="store_true", help="every field, as JSON")
    _claims_file(claims)

    cov = sub.add_parser(
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
    _claims_file(cov)

    cmp = sub.add_parser(
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
    _claims_file(cmp)


def _claims_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--claims-file",
        type=Path,
        metavar="FILE",
        help="a team's own claim catalogue, listed beside raychaos' (default: "
        "RAYCHAOS_CLAIMS_FILE, else the copy a run left in its results directory)",
    )


# -- report ---------------------------------------------------------------------------------
def report(args: argparse.Namespace) -> int:
    from chaos.report.coverage import load_raychaos
    from chaos.report.html import exit_code, write_report

    results: Path = args.results
    output: Path = args.output
    _catalogue(args.claims_file, results)
    # As coverage and compare do: a directory without raychaos results is a usage error (2),
    # never an empty page that exits 0.
    loaded = write_report(results, output, loaded=load_raychaos(results))
    counts: dict[str, int] = {}
    for test in loaded.tests:
        counts[test.effective_status] = counts.get(test.effective_status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results"
    say(f"report {output} ({summary})")
    for problem in loaded.problems:
        note(f"warning: unreadable {problem}")
    return exit_code(loaded)


# -- evidence -------------------------------------------------------------------------------
def evidence(args: argparse.Namespace) -> int:
    from chaos.report.evidence import export

    added = export(args.results, args.out)
    for family, count in added.items():
        say(f"{args.out / (family + '.json')}: {count} new run(s)")
    return 0


def _catalogue(claims_file: Path | None = None, *results: Path | None) -> Catalogue:
    """Ours with a team's claims: ``claims_file``, else RAYCHAOS_CLAIMS_FILE, else the copy
    the run left in the first of ``results`` that has one; in effect for the whole command."""
    import os

    from chaos.report.catalogue import RESULTS_COPY, TEAM_ENV, use_team_file

    team = claims_file or (Path(os.environ[TEAM_ENV]) if os.environ.get(TEAM_ENV) else None)
    if team is None:
        copies = (r / RESULTS_COPY for r in results if r is not None)
        team = next((c for c in copies if c.is_file()), None)
    return use_team_file(team)


def _patterns(raw: Sequence[str]) -> list[str]:
    from chaos.report.patterns import split_list

    return [p for item in raw for p in split_list(item)]


# -- claims ---------------------------------------------------------------------------------
def claims(args: argparse.Namespace) -> int:
    return claims_command(args.patterns, as_json=args.json, claims_file=args.claims_file)


def claims_command(
    patterns: Sequence[str], *, as_json: bool = False, claims_file: Path | None = None
) -> int:
    catalogue = _catalogue(claims_file)
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
        err(f"0 of {len(catalogue)} claims")
        return 0
    if as_json:
        out(json.dumps([c.to_json() for c in chosen], indent=1, ensure_ascii=False))
        return 0
    width = max(len(c.id) for c in chosen) + 2
    feature = max(len(c.feature) for c in chosen) + 2
    for claim in chosen:
        out(f"{claim.id.ljust(width)}{claim.feature.ljust(feature)}{claim.fault}")
        if claim.since or claim.scope:
            out(f"{'':{width + feature}}scope: {claim.scope_text}")
    err(f"{len(chosen)} of {len(catalogue)} claims")
    return 0


# -- coverage -------------------------------------------------------------------------------
def coverage(args: argparse.Namespace) -> int:
    return coverage_command(
        args.results, strict=args.strict, patterns=args.claims, claims_file=args.claims_file
    )


def coverage_command(
    results: Path, *, strict: bool = False, patterns: str = "", claims_file: Path | None = None
) -> int:
    from chaos.report.coverage import coverage, load_raychaos, render_text

    catalogue = _catalogue(claims_file, results)
    chosen = catalogue.select(_patterns([patterns])) if patterns.strip() else []
    cov = coverage(load_raychaos(results), catalogue, chosen)
    out(render_text(cov, strict=strict))
    return cov.exit_code(strict=strict)


# -- compare --------------------------------------------------------------------------------
def compare(args: argparse.Namespace) -> int:
    return compare_command(
        args.base,
        args.candidate,
        args.base_version,
        args.candidate_version,
        args.output,
        claims_file=args.claims_file,
    )


def compare_command(
    base: Path,
    candidate: Path | None,
    base_version: str | None = None,
    candidate_version: str | None = None,
    output: Path | None = None,
    names: tuple[str, str] = ("", ""),
    claims_file: Path | None = None,
) -> int:
    import dataclasses

    from chaos.report.compare import compare, pick_sides
    from chaos.report.compare_table import render_markdown
    from chaos.report.html import render_compare

    before, after = pick_sides(base, candidate, base_version, candidate_version)
    before = dataclasses.replace(before, name=names[0])
    after = dataclasses.replace(after, name=names[1])
    result = compare(before, after, _catalogue(claims_file, candidate, base))
    out(render_markdown(result), end="")
    page = output or Path("reports") / f"compare-{before.release}-to-{after.release}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render_compare(result), encoding="utf-8")
    note(f"compare page {page}")
    return result.exit_code
