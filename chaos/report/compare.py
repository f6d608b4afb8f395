"""Two runs of the claims side by side: what an upgrade of Ray (or of the suite) changed.

``raychaos compare BASE CANDIDATE`` compares two results directories, or two releases inside
one (``raychaos compare DIR`` when it holds exactly two). Per claim: each side's verdict
(:mod:`chaos.report.coverage`) and one change class (:data:`CHANGES`, worst first). Only a
*regression* (passed → failed or broken) fails the comparison. A strict xfail that passes
is pytest's ``[XPASS(strict)]`` failure: here it is "finding gone", never a regression.

Exceptions and ``.reason`` values are read from what the results carry: the failure message
and string measurements. Measured windows are compared only where a side repeated a test
(several results of one historyId, or a list of values / a ``trials`` mapping in its
measurements): a window moved when the two sides' ranges do not overlap.

Repeated trials (``--raychaos-trials N``, :mod:`chaos.trials`): a claim's verdict is the worst
of every trial, shown with how many trials reached it (``failed 1/3``), and a change in its
pass rate is a regression only beyond trial noise (:func:`chaos.report.stats.beyond_noise`):
every base trial passed and a candidate trial did not, or the candidate's 95 % Wilson
interval lies wholly below the base's. Within the noise the row says so and stays unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from chaos.errors import ChaosError
from chaos.report.catalogue import Catalogue
from chaos.report.claims import untitled
from chaos.report.coverage import (
    BROKEN,
    FAILED,
    FINDING,
    MISSING,
    PASSED,
    XPASS,
    Cell,
    cells_of,
    load_raychaos,
    raychaos_tests,
    release_of,
    releases_of,
    verdict_of,
)
from chaos.report.model import FINDING as FINDING_RE
from chaos.report.model import Results, TestResult
from chaos.report.stats import Proportion, beyond_noise, measurements, numbers
from chaos.trials import untrial

REGRESSION = "regression"
FINDING_GONE = "finding no longer reproduces"
NEW_FINDING = "new finding"
NOW_PASSES = "now passes"
EXCEPTION_CHANGED = "exception changed"
WINDOW_MOVED = "window moved"
MISSING_ONE_SIDE = "missing on one side"
CHANGED = "changed"
NOT_RUN = "not run"
UNCHANGED = "unchanged"
#: Change classes, most important first (the order of the report's rows).
CHANGES = (
    REGRESSION,
    NEW_FINDING,
    FINDING_GONE,
    NOW_PASSES,
    EXCEPTION_CHANGED,
    WINDOW_MOVED,
    CHANGED,
    MISSING_ONE_SIDE,
    NOT_RUN,
    UNCHANGED,
)
#: The status colour of each change on the HTML page (html.py's pill classes).
COLOURS = {
    REGRESSION: "failed",
    NEW_FINDING: "finding",
    FINDING_GONE: "passed",
    NOW_PASSES: "passed",
    EXCEPTION_CHANGED: "broken",
    WINDOW_MOVED: "broken",
    CHANGED: "skipped",
    MISSING_ONE_SIDE: "not run",
    NOT_RUN: "not run",
    UNCHANGED: "unknown",
}

_ERROR = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b")
_REASON = re.compile(r"""\breason\b['"]?\s*[:=]\s*['"]?([A-Z][A-Z0-9_]{2,})""")
#: The checker's own exception: it says an assertion failed, not what Ray raised.
_CHECKER = {"AssertionError"}


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the results of one release in one directory."""

    directory: Path
    release: str
    #: Its raychaos results: every trial, reruns of a trial folded (``raychaos_tests``).
    tests: tuple[TestResult, ...]
    #: Every result of the release, repeated trials included.
    runs: tuple[TestResult, ...]
    blobs: Mapping[str, bytes]

    @property
    def label(self) -> str:
        return f"Ray {self.release} ({self.directory})"


def _side(results: Results, release: str) -> Side:
    runs = [t for t in results.runs if (t.ray_version or t.claims) and release_of(t) == release]
    return Side(
        results.directory,
        release,
        tuple(t for t in raychaos_tests(results) if release_of(t) == release),
        tuple(runs),
        results.blobs,
    )


def _only_release(results: Results, given: str | None, flag: str) -> str:
    releases = releases_of(raychaos_tests(results))
    if given is not None:
        if given not in releases:
            raise ChaosError(
                f"{results.directory} has no results for Ray {given} "
                f"(it holds {', '.join(releases)})"
            )
        return given
    if len(releases) != 1:
        raise ChaosError(
            f"{results.directory} holds Ray {', '.join(releases)}: choose one with {flag}"
        )
    return releases[0]


def pick_sides(
    base_dir: Path,
    candidate_dir: Path | None = None,
    base_version: str | None = None,
    candidate_version: str | None = None,
) -> tuple[Side, Side]:
    """Load and choose both sides; :class:`ChaosError` (a usage error) when they are not two.

    One directory (``candidate_dir`` None): two of its releases, the two it holds when no
    version is given (older = base). The same directory twice needs two versions.
    """
    base_results = load_raychaos(base_dir)
    same = candidate_dir is None or candidate_dir.resolve() == base_dir.resolve()
    if not same:
        assert candidate_dir is not None
        candidate_results = load_raychaos(candidate_dir)
        return (
            _side(base_results, _only_release(base_results, base_version, "--base-version")),
            _side(
                candidate_results,
                _only_release(candidate_results, candidate_version, "--candidate-version"),
            ),
        )
    releases = releases_of(raychaos_tests(base_results))
    if candidate_dir is not None and base_version is None and candidate_version is None:
        raise ChaosError(
            f"{base_dir} is compared with itself",
            hint=f"compare two releases in it with `raychaos compare {base_dir}` "
            "or --base-version/--candidate-version",
        )
    for given in (base_version, candidate_version):
        if given is not None and given not in releases:
            raise ChaosError(
                f"{base_dir} has no results for Ray {given} (it holds {', '.join(releases)})"
            )
    if base_version is not None and base_version == candidate_version:
        raise ChaosError(f"Ray {base_version} is compared with itself in {base_dir}")
    if base_version is None and candidate_version is None:
        if len(releases) != 2:
            raise ChaosError(
                f"{base_dir} holds Ray {', '.join(releases)}: expected exactly two releases",
                hint="choose them with --base-version and --candidate-version",
            )
        base_version, candidate_version = releases
    elif base_version is None or candidate_version is None:
        given = base_version or candidate_version
        others = [r for r in releases if r != given]
        if len(others) != 1:
            raise ChaosError(
                f"{base_dir} holds Ray {', '.join(releases)}: which one to compare {given} with?",
                hint="give both --base-version and --candidate-version",
            )
        base_version = base_version or others[0]
        candidate_version = candidate_version or others[0]
    return _side(base_results, base_version), _side(base_results, candidate_version)


# -- what a cell says ---------------------------------------------------------------------
def _observed(message: str) -> str:
    """The message up to pytest's ``assert …`` explanation, which names expected values too."""
    lines = []
    for line in message.splitlines():
        if line.lstrip().startswith("assert "):
            break
        lines.append(line)
    return "\n".join(lines)


def signature(tests: Iterable[TestResult], blobs: Mapping[str, bytes]) -> tuple[str, ...]:
    """Exception classes and ``reason`` values named by the tests' messages and measurements.

    Left out: the FINDING reason of a strict xfail (the marker's fixed text) and pytest's
    ``assert a == b`` explanation (it names the expected class as well as the one seen).
    """
    texts: list[str] = []
    for test in tests:
        message = test.message
        if FINDING_RE.match(message):
            message = message.partition("\n\n")[2]
        texts.append(_observed(message))
        texts += [v for v in measurements(test, blobs).values() if isinstance(v, str)]
    errors = {e for text in texts for e in _ERROR.findall(text)} - _CHECKER
    reasons = {f"reason {r}" for text in texts for r in _REASON.findall(text)}
    return tuple(sorted(errors) + sorted(reasons))


def trials(side: Side, claim: str) -> dict[str, list[float]]:
    """(test, measurement) → every value of it across repeated runs of the claim's tests.

    Keys name the test without the release and the trial (so both sides' keys meet, and
    ``test_x[2.60.0-trial2]`` joins ``test_x[2.60.0-trial1]``). A ``trials`` mapping
    in the measurements adds its lists (``{"trials": {"kill → DEAD (s)": [6.1, 6.3]}}``).
    """
    values: dict[str, list[float]] = {}
    for run in side.runs:
        if claim not in run.claims:
            continue
        test = untrial(untitled(run.name)).replace(side.release, "<ray>")
        for name, value in measurements(run, side.blobs).items():
            if name == "trials" and isinstance(value, dict):
                for sub, listed in value.items():
                    values.setdefault(f"{test}: {sub}", []).extend(numbers(listed))
            else:
                values.setdefault(f"{test}: {name}", []).extend(numbers(value))
    return {k: v for k, v in values.items() if v}


def moved_windows(base: Side, candidate: Side, claim: str) -> list[str]:
    """Measurements with repeated trials on both sides whose ranges do not overlap."""
    before, after = trials(base, claim), trials(candidate, claim)
    moved = []
    for key in sorted(before.keys() & after.keys()):
        b, c = before[key], after[key]
        if len(b) >= 2 and len(c) >= 2 and (max(c) < min(b) or min(c) > max(b)):
            moved.append(
                f"{key}: {min(b):g}–{max(b):g} → {min(c):g}–{max(c):g} "
                f"({len(b)} vs {len(c)} trials)"
            )
    return moved


# -- classification -------------------------------------------------------------------------
def classify(base: str, candidate: str) -> str:
    """The change class of a claim whose verdict went from ``base`` to ``candidate``."""
    if base == candidate:
        return NOT_RUN if base == MISSING else UNCHANGED
    if MISSING in (base, candidate):
        return MISSING_ONE_SIDE
    if candidate == XPASS or (base == FINDING and candidate == PASSED):
        return FINDING_GONE
    if base == PASSED and candidate in (FAILED, BROKEN):
        return REGRESSION
    if candidate == FINDING:
        return NEW_FINDING
    if candidate == PASSED:
        return NOW_PASSES
    return CHANGED


def _first_line(test: TestResult) -> str:
    if test.strict_xpass:
        return "the test of the recorded finding passed ([XPASS(strict)])"
    message = FINDING_RE.sub("FINDING:", test.message, count=1)
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= 160 else line[:157] + "…"


@dataclass(frozen=True)
class Row:
    claim: str
    base: Cell
    candidate: Cell
    change: str
    #: What changed, in one line ("" when nothing is worth saying).
    detail: str


def passes(cell: Cell) -> Proportion:
    """Passed trials out of the judged ones (passed, failed, broken) of a claim's tests."""
    judged = [verdict_of(t) for t in cell.tests if verdict_of(t) in (PASSED, FAILED, BROKEN)]
    return Proportion(judged.count(PASSED), len(judged))


def _noise(b: Cell, c: Cell, change: str) -> tuple[str, str]:
    """The change after trial noise is weighed, and a note when trials were compared."""
    before, after = passes(b), passes(c)
    if max(before.n, after.n) < 2 or min(before.n, after.n) < 1:
        return change, ""
    if beyond_noise(before, after):
        return REGRESSION, f"passed {before} → {after}: beyond trial noise"
    if before.successes * after.n != after.successes * before.n:
        return change, f"passed {before} → {after}: within trial noise"
    return change, ""


def _row(claim: str, base: Side, candidate: Side, b: Cell, c: Cell) -> Row:
    change = classify(b.verdict, c.verdict)
    notes: list[str] = []
    if MISSING not in (b.verdict, c.verdict):
        change, note = _noise(b, c, change)
        notes += [note] if note else []
    if MISSING not in (b.verdict, c.verdict):
        before, after = signature(b.tests, base.blobs), signature(c.tests, candidate.blobs)
        # Beside a pass, the other side's message says it all (it is the detail below).
        if before != after and PASSED not in (b.verdict, c.verdict):
            notes.append(f"{', '.join(before) or '—'} → {', '.join(after) or '—'}")
            if change == UNCHANGED:
                change = EXCEPTION_CHANGED
        moved = moved_windows(base, candidate, claim)
        if moved:
            notes.append("window moved: " + "; ".join(moved))
            if change == UNCHANGED:
                change = WINDOW_MOVED
    if change in (REGRESSION, NEW_FINDING, CHANGED) or (
        change == MISSING_ONE_SIDE and c.verdict != MISSING
    ):
        worst = next((t for t in c.tests if t.message or t.strict_xpass), None)
        if worst is not None:
            notes.insert(0, _first_line(worst))
    elif change == FINDING_GONE:
        recorded = next((t for t in b.tests if FINDING_RE.match(t.message)), None)
        notes.insert(0, _first_line(recorded) if recorded else "the recorded finding passed")
    elif change == NOW_PASSES:
        was = next((t for t in b.tests if t.message or t.strict_xpass), None)
        if was is not None:
            notes.insert(0, f"was: {_first_line(was)}")
    return Row(claim, b, c, change, "; ".join(notes))


@dataclass(frozen=True)
class Comparison:
    base: Side
    candidate: Side
    rows: tuple[Row, ...]
    #: Claim ids in the results that the catalogue does not know.
    unknown: tuple[str, ...] = ()

    def count(self, change: str) -> int:
        return sum(1 for r in self.rows if r.change == change)

    @property
    def exit_code(self) -> int:
        """1 on any regression, else 0."""
        return 1 if self.count(REGRESSION) else 0


def compare(base: Side, candidate: Side, catalogue: Catalogue) -> Comparison:
    """One row per catalogue claim (then any other claim either side carries)."""
    before, after = cells_of(base.tests, base.release), cells_of(candidate.tests, candidate.release)
    extra = sorted((before.keys() | after.keys()) - set(catalogue.ids))
    rows = tuple(
        _row(
            claim,
            base,
            candidate,
            before.get(claim, Cell(MISSING)),
            after.get(claim, Cell(MISSING)),
        )
        for claim in [*catalogue.ids, *extra]
    )
    return Comparison(base, candidate, rows, tuple(extra))


def _ordered(rows: Sequence[Row], catalogue_order: Sequence[str]) -> list[Row]:
    position = {c: n for n, c in enumerate(catalogue_order)}
    return sorted(rows, key=lambda r: (CHANGES.index(r.change), position.get(r.claim, 1 << 30)))


def summary(cmp: Comparison) -> str:
    parts = [f"{cmp.count(c)} {c}" for c in CHANGES if cmp.count(c)]
    return ", ".join(parts)


# -- output ---------------------------------------------------------------------------------
def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(cmp: Comparison) -> str:
    """The changed claims as a Markdown table (for a terminal or a pull-request comment)."""
    b, c = cmp.base, cmp.candidate
    lines = [
        f"# raychaos compare: Ray {b.release} → Ray {c.release}",
        "",
        f"- base: {_md(b.label)}",
        f"- candidate: {_md(c.label)}",
        f"- {len(cmp.rows)} claims: {summary(cmp)}",
        "",
    ]
    quiet = (UNCHANGED, NOT_RUN)
    changed = [r for r in _ordered(cmp.rows, [r.claim for r in cmp.rows]) if r.change not in quiet]
    if changed:
        lines += [
            f"| claim | Ray {_md(b.release)} | Ray {_md(c.release)} | change | detail |",
            "|---|---|---|---|---|",
        ]
        for row in changed:
            change = f"**{row.change}**" if row.change == REGRESSION else row.change
            lines.append(
                f"| {row.claim} | {row.base.shown} | {row.candidate.shown} | {change} "
                f"| {_md(row.detail)} |"
            )
        lines.append("")
    for change, title in ((UNCHANGED, "Unchanged"), (NOT_RUN, "Not run on either side")):
        same = [r.claim for r in cmp.rows if r.change == change]
        if same:
            lines.append(f"{title} ({len(same)}): {', '.join(same)}")
    if cmp.unknown:
        lines.append(f"Not in the claim catalogue: {', '.join(cmp.unknown)}")
    lines.append(
        "Result: "
        + (f"{cmp.count(REGRESSION)} regression(s)" if cmp.exit_code else "no regression")
    )
    return "\n".join(lines) + "\n"


def render_html(cmp: Comparison, *, generated: datetime | None = None) -> str:
    """The whole comparison as one self-contained page, in the report's style."""
    from chaos.report.html import escape, page, pill

    b, c = cmp.base, cmp.candidate
    pills = " ".join(pill(COLOURS[ch], f"{ch} {cmp.count(ch)}") for ch in CHANGES if cmp.count(ch))

    def verdict(cell: Cell) -> str:
        css = "not run" if cell.verdict == MISSING else cell.verdict
        css = {XPASS: "passed"}.get(css, css)
        return pill(css, cell.shown)

    rows = "".join(
        f"<tr><th>{escape(r.claim)}</th><td>{verdict(r.base)}</td><td>{verdict(r.candidate)}</td>"
        f"<td>{pill(COLOURS[r.change], r.change)}</td><td>{escape(r.detail)}</td></tr>"
        for r in _ordered(cmp.rows, [r.claim for r in cmp.rows])
    )
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    body = (
        f"<p>base: {escape(b.label)}<br>candidate: {escape(c.label)}</p>"
        f"<p>{len(cmp.rows)} claims: {pills}</p>"
        f"<p><b>{'REGRESSION' if cmp.exit_code else 'No regression'}</b>: a regression is a "
        "claim that passed on the base and failed or broke on the candidate. A recorded "
        "finding whose test now passes (pytest's [XPASS(strict)]) is listed as "
        f"“{FINDING_GONE}”.</p>"
        "<table><tr><th>claim</th>"
        f"<th>Ray {escape(b.release)}</th><th>Ray {escape(c.release)}</th>"
        f"<th>change</th><th>detail</th></tr>{rows}</table>"
    )
    return page(
        f"raychaos compare — Ray {b.release} → Ray {c.release}",
        f"generated {when}",
        body,
    )
