"""Two runs of the claims side by side: what an upgrade of Ray (or of the suite) changed.

``raychaos compare BASE CANDIDATE`` compares two results directories, or two releases inside
one (``raychaos compare DIR`` when it holds exactly two). Per claim: each side's verdict
(:mod:`chaos.report.coverage`), one change class (:data:`CHANGES`, most important first) and
every window it measured, side by side. Only a *regression* (passed → failed or broken) fails
the comparison. A strict xfail that passes is pytest's ``[XPASS(strict)]`` failure: here it is
"finding gone", never a regression.

The table a team reads before an upgrade (:func:`lines`; Markdown, the HTML page and
``raychaos report`` render it alike): the changes, then the unchanged claims, each followed by
its windows (median and range over the trials, base beside candidate), then one line counting
the claims run on neither side. A result judges only the claims it evaluated
(:func:`chaos.report.coverage.verdict_for`): a failed body leaves INV-01/INV-02 *not judged*
for that test, and a finding about one claim leaves another claim of its test passed where the
body recorded it held, else *not judged* (the detail says which). Each detail is the message
of the result that decided the verdict.

Exceptions and ``.reason`` values are read from what the results carry: the failure message
and string measurements. A measurement named for a claim (``TASK-05 kill → retry done (s)``)
is that claim's; any other is every body claim's of its test (:func:`owned`). A window moved
beyond the trials' noise (ranges apart) or, with a single trial, beyond a stated tolerance
(:func:`chaos.report.stats.moved`).

Repeated trials (:mod:`chaos.plugin.trials`): a claim's verdict is the worst
of every trial, shown with how many trials reached it (``failed 1/3``), and a change in its
pass rate is a regression only beyond trial noise (:func:`chaos.report.stats.beyond_noise`):
every base trial passed and a candidate trial did not, or the candidate's 95 % Wilson
interval lies wholly below the base's. Within the noise the row says so and stays unchanged.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import ChaosError
from chaos.experiment import POSTCONDITIONS
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
from chaos.report.model import INCONCLUSIVE, Results, TestResult
from chaos.report.stats import (
    Proportion,
    Spread,
    beyond_noise,
    measurements,
    moved,
    numbers,
)
from chaos.report.trials import untrial

REGRESSION = "regression"
#: One side's verdict was given on a host too busy to judge: never a regression or a fix.
INCONCLUSIVE_SIDE = "inconclusive on one side"
FINDING_GONE = "finding no longer reproduces"
NEW_FINDING = "new finding"
NOW_PASSES = "now passes"
EXCEPTION_CHANGED = "exception changed"
WINDOW_MOVED = "window moved"
MISSING_ONE_SIDE = "missing on one side"
CHANGED = "changed"
NOT_RUN = "not run"
UNCHANGED = "unchanged"
#: Change classes, most important first (the order of the report's rows): the changes, then
#: the unchanged claims; claims run on neither side are only counted.
CHANGES = (
    REGRESSION,
    NEW_FINDING,
    FINDING_GONE,
    NOW_PASSES,
    EXCEPTION_CHANGED,
    WINDOW_MOVED,
    CHANGED,
    MISSING_ONE_SIDE,
    INCONCLUSIVE_SIDE,
    UNCHANGED,
    NOT_RUN,
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
    INCONCLUSIVE_SIDE: "broken",
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
    #: What the side ran on when that is not just the release (a team's image).
    name: str = ""

    @property
    def label(self) -> str:
        named = f"{self.name}, " if self.name else ""
        return f"{named}Ray {self.release} ({self.directory})"


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
    if candidate_dir is not None and candidate_dir.resolve() != base_dir.resolve():
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


#: A measurement named for one claim: ``TASK-05 kill → retry done (s)``.
_OWNER = re.compile(r"^([A-Z]+-[0-9]+)\b:?\s*")


def owned(claim: str, claims: Sequence[str], name: str) -> str | None:
    """The name of measurement ``name`` in ``claim``'s row, None when it is not ``claim``'s.

    A name that starts with one of the test's ``claims`` belongs to that claim (shown without
    the id); any other belongs to every claim of the test's body, never to a postcondition
    (they measure nothing, and every experiment carries them).
    """
    found = _OWNER.match(name)
    if found and found.group(1) in claims:
        return (name[found.end() :] or name) if found.group(1) == claim else None
    return None if claim in POSTCONDITIONS else name


def _own_measurements(
    test: TestResult, claim: str, blobs: Mapping[str, bytes]
) -> list[tuple[str, object]]:
    """(name, value) of ``test``'s measurements that are ``claim``'s; a ``trials`` mapping's
    lists under their own names."""
    found: list[tuple[str, object]] = []
    for name, value in measurements(test, blobs).items():
        listed = value.items() if name == "trials" and isinstance(value, dict) else [(name, value)]
        for each, data in listed:
            shown = owned(claim, test.claims, str(each))
            if shown is not None:
                found.append((shown, data))
    return found


def signature(
    tests: Iterable[TestResult], blobs: Mapping[str, bytes], claim: str | None = None
) -> tuple[str, ...]:
    """Exception classes and ``reason`` values named by the tests' messages and measurements
    (with ``claim``: only the measurements that are that claim's, :func:`owned`).

    Left out: the FINDING reason of a strict xfail (the marker's fixed text) and pytest's
    ``assert a == b`` explanation (it names the expected class as well as the one seen).
    """
    texts: list[str] = []
    for test in tests:
        message = test.message
        if FINDING_RE.match(message):
            message = message.partition("\n\n")[2]
        texts.append(_observed(message))
        found = (
            list(measurements(test, blobs).items())
            if claim is None
            else _own_measurements(test, claim, blobs)
        )
        texts += [v for _, v in found if isinstance(v, str)]
    errors = {e for text in texts for e in _ERROR.findall(text)} - _CHECKER
    reasons = {f"reason {r}" for text in texts for r in _REASON.findall(text)}
    return tuple(sorted(errors) + sorted(reasons))


def _test_name(run: TestResult, release: str) -> str:
    """The test without its claim ids, trial and release: both sides' names meet."""
    name = untrial(untitled(run.name)).replace(release, "<ray>")
    return name.replace("[<ray>]", "").replace("<ray>-", "").replace("-<ray>", "")


def trials(side: Side, claim: str) -> dict[tuple[str, str], list[float]]:
    """(test, measurement) → every value of the claim's measurement over repeated runs.

    Tests are named without the release and the trial (so both sides' keys meet, and
    ``test_x[2.60.0-trial2]`` joins ``test_x[2.60.0-trial1]``); measurements as
    :func:`owned` names them. A ``trials`` mapping in the measurements adds its lists
    (``{"trials": {"kill → DEAD (s)": [6.1, 6.3]}}``).
    """
    values: dict[tuple[str, str], list[float]] = {}
    for run in side.runs:
        if claim not in run.claims:
            continue
        test = _test_name(run, side.release)
        for name, value in _own_measurements(run, claim, side.blobs):
            values.setdefault((test, name), []).extend(numbers(value))
    return {k: v for k, v in values.items() if v}


@dataclass(frozen=True)
class Window:
    """One measured window of a claim on both sides: median and range over the trials."""

    #: The measurement, with its test when the claim's windows come from several tests.
    label: str
    base: Spread | None
    candidate: Spread | None
    #: Why it moved (:func:`chaos.report.stats.moved`), "" when it did not or a side lacks it.
    moved: str = ""

    @property
    def delta(self) -> str:
        """The candidate's median against the base's: ``-57 (×0.062)``."""
        if self.base is None or self.candidate is None:
            return ""
        b, c = self.base.median, self.candidate.median
        ratio = f" (×{c / b:.2g})" if b > 0 and c > 0 else ""
        return f"{c - b:+.3g}{ratio}"


def windows(base: Side, candidate: Side, claim: str) -> tuple[Window, ...]:
    """Every measurement of ``claim`` on either side, side by side, in first-seen order."""
    before, after = trials(base, claim), trials(candidate, claim)
    keys = list(dict.fromkeys([*before, *after]))
    several = len({test for test, _ in keys}) > 1
    found = []
    for key in keys:
        b = Spread(tuple(before[key])) if key in before else None
        c = Spread(tuple(after[key])) if key in after else None
        found.append(
            Window(
                f"{key[0]}: {key[1]}" if several else key[1],
                b,
                c,
                moved(b, c, seconds=key[1].rstrip().endswith("(s)"))
                if b is not None and c is not None
                else "",
            )
        )
    return tuple(found)


# -- classification -------------------------------------------------------------------------
def classify(base: str, candidate: str) -> str:
    """The change class of a claim whose verdict went from ``base`` to ``candidate``."""
    if base == candidate:
        return NOT_RUN if base == MISSING else UNCHANGED
    if MISSING in (base, candidate):
        return MISSING_ONE_SIDE
    if INCONCLUSIVE in (base, candidate):
        return INCONCLUSIVE_SIDE
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
    #: What changed, in one line ("" when nothing is worth saying), from the result that
    #: decided the verdict.
    detail: str
    #: The claim's measured windows, base and candidate side by side.
    windows: tuple[Window, ...] = ()


def passes(cell: Cell) -> Proportion:
    """Passed trials out of the judged ones (passed, failed, broken) of a claim's tests."""
    verdicts = cell.verdicts or tuple(verdict_of(t) for t in cell.tests)
    judged = [v for v in verdicts if v in (PASSED, FAILED, BROKEN)]
    return Proportion(judged.count(PASSED), len(judged))


def _repeated(cell: Cell) -> bool:
    """Whether a test of the cell ran more than once (trials: several results of a historyId)."""
    ids = [t.history_id for t in cell.tests]
    return len(set(ids)) < len(ids)


def _noise(b: Cell, c: Cell, change: str) -> tuple[str, str]:
    """The change after trial noise is weighed, and a note when trials were compared (not
    when a claim's several tests ran once each: they are not trials of one another)."""
    before, after = passes(b), passes(c)
    if not (_repeated(b) or _repeated(c)):
        return change, ""
    if max(before.n, after.n) < 2 or min(before.n, after.n) < 1:
        return change, ""
    if beyond_noise(before, after):
        return REGRESSION, f"passed {before} → {after}: beyond trial noise"
    if before.successes * after.n != after.successes * before.n:
        return change, f"passed {before} → {after}: within trial noise"
    return change, ""


def _own(cell: Cell) -> list[TestResult]:
    """The cell's tests whose outcome is the claim's own (not a body's finding under a
    postcondition, nor a postcondition's failure under the body's claims)."""
    verdicts = cell.verdicts or tuple(verdict_of(t) for t in cell.tests)
    return [t for t, v in zip(cell.tests, verdicts, strict=True) if v == verdict_of(t)]


def _said(test: TestResult | None) -> str:
    return _first_line(test) if test is not None and (test.message or test.strict_xpass) else ""


def _why_unjudged(test: TestResult, claim: str) -> str:
    """Why ``test`` carries ``claim`` but did not judge it
    (:func:`chaos.report.coverage.verdict_for`)."""
    if claim not in POSTCONDITIONS and test.finding:
        about = ", ".join(test.finding_claims)
        return f"it ended in its finding about {about} before recording {claim} held"
    if test.inconclusive is not None:
        return "its run was inconclusive (the host too busy to judge) and this check did not pass"
    return "it failed before this check ran"


def _unjudged(side: Side, cell: Cell, claim: str) -> str:
    why: dict[str, list[str]] = {}
    for test in cell.unjudged:
        names = why.setdefault(_why_unjudged(test, claim), [])
        name = _test_name(test, side.release)
        if name not in names:
            names.append(name)
    return "; ".join(
        f"not judged by {', '.join(names)} on Ray {side.release}: {reason}"
        for reason, names in why.items()
    )


def _row(claim: str, base: Side, candidate: Side, b: Cell, c: Cell) -> Row:
    change = classify(b.verdict, c.verdict)
    notes: list[str] = []
    measured = windows(base, candidate, claim)
    if MISSING not in (b.verdict, c.verdict):
        change, note = _noise(b, c, change)
        notes += [note] if note else []
        before = signature(_own(b), base.blobs, claim)
        after = signature(_own(c), candidate.blobs, claim)
        # Beside a pass, the other side's message says it all (it is the detail below).
        if before != after and PASSED not in (b.verdict, c.verdict):
            notes.append(f"{', '.join(before) or '—'} → {', '.join(after) or '—'}")
            if change == UNCHANGED:
                change = EXCEPTION_CHANGED
        if change == UNCHANGED and any(w.moved for w in measured):
            change = WINDOW_MOVED
    said = ""
    if change in (REGRESSION, NEW_FINDING, CHANGED) or (
        change == MISSING_ONE_SIDE and c.verdict != MISSING
    ):
        said = _said(c.deciding())
    elif change == FINDING_GONE:
        recorded = b.deciding() if b.verdict == FINDING else None
        said = _said(recorded) or "the recorded finding passed"
    elif change == NOW_PASSES:
        was = _said(b.deciding())
        said = f"was: {was}" if was else ""
    notes = ([said] if said else []) + notes
    notes += [n for n in (_unjudged(base, b, claim), _unjudged(candidate, c, claim)) if n]
    return Row(claim, b, c, change, "; ".join(notes), measured)


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


def compare(base: Side, candidate: Side, catalogue: Catalogue | Sequence[str]) -> Comparison:
    """One row per catalogue claim (then any other claim either side carries)."""
    ids = catalogue.ids if isinstance(catalogue, Catalogue) else tuple(catalogue)
    before, after = cells_of(base.tests, base.release), cells_of(candidate.tests, candidate.release)
    extra = sorted((before.keys() | after.keys()) - set(ids))
    rows = tuple(
        _row(
            claim,
            base,
            candidate,
            before.get(claim, Cell(MISSING)),
            after.get(claim, Cell(MISSING)),
        )
        for claim in [*ids, *extra]
    )
    return Comparison(base, candidate, rows, tuple(extra))


def sides_of(results: Results) -> list[tuple[Side, Side]]:
    """Each release of ``results`` against the next (oldest first): what ``raychaos report``
    compares when a directory holds several releases."""
    releases = releases_of(raychaos_tests(results))
    return [(_side(results, a), _side(results, b)) for a, b in itertools.pairwise(releases)]


def ordered(cmp: Comparison) -> list[Row]:
    """Changes first (:data:`CHANGES` order), then unchanged claims; catalogue order within."""
    position = {r.claim: n for n, r in enumerate(cmp.rows)}
    shown = [r for r in cmp.rows if r.change != NOT_RUN]
    return sorted(shown, key=lambda r: (CHANGES.index(r.change), position[r.claim]))


def summary(cmp: Comparison) -> str:
    parts = [f"{cmp.count(c)} {c}" for c in CHANGES if cmp.count(c)]
    return ", ".join(parts)
