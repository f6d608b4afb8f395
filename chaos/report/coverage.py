"""Claim coverage of an Allure results directory: every catalogue claim × Ray release.

``raychaos coverage RESULTS`` says, per claim and per release the results hold, whether the
claim was verified. One verdict per result (:func:`verdict_of`), the worst per cell
(:data:`VERDICT_ORDER`); :mod:`chaos.report.compare` reads the same cells.

A claim is *accounted for* on a release when it was verified (its tests passed) or when the
gap to Ray's docs is a recorded finding: the test raised the exception its ``FINDING:`` xfail
names in ``raises=``, as the ``raychaos.finding`` label records. Only that label counts: a
result whose message reads ``XFAIL FINDING:`` without it is a skip, and the coverage lists it
(:attr:`Coverage.uncounted`). A ``pytest.skip("FINDING: …")`` or an imperative
``pytest.xfail`` is a skip.

Verdicts are per claim: a finding is about the claims its exception names
(:attr:`chaos.errors.Finding.claims`, the ``raychaos.finding.claim`` labels); the test's other
claims are passed where the body recorded them held (``verdict: <claim> held`` steps) and not
judged otherwise. A failed or broken body leaves the claims it had recorded held passed.
``strict`` accepts verified only. A skip verifies
nothing, and a strict xfail that passed (the finding no longer reproduces) failed the run
until its marker is updated.

A result judges only what it evaluated (:func:`verdict_for`): the postconditions INV-01 and
INV-02 run at teardown after a body that did not fail, so a failed body leaves them *not
judged* for that test, and a postcondition that failed leaves the body's claims passed — or,
after a body that raised its finding, broken: a finding is not accounted for by a run whose
postconditions failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.errors import ChaosError
from chaos.experiment import POSTCONDITIONS
from chaos.report.catalogue import Catalogue
from chaos.report.model import INCONCLUSIVE, Results, TestResult, every_trial, load_results
from chaos.spec.releases import sort_releases

PASSED = "passed"
FINDING = "finding"
#: A strict xfail (recorded finding) whose test passed: pytest fails it ("[XPASS(strict)]").
XPASS = "finding gone"
SKIPPED = "skipped"
FAILED = "failed"
BROKEN = "broken"
MISSING = "missing"
#: A result that carries a claim but never evaluated it (a postcondition after a failed body).
NOT_JUDGED = "not judged"
#: A cell shows the worst verdict among its tests; worst first. Inconclusive (a host too busy
#: to judge) is worse than a verdict given, better than a run that went wrong.
VERDICT_ORDER = (FAILED, BROKEN, XPASS, SKIPPED, INCONCLUSIVE, FINDING, PASSED)
#: Coverage buckets: what each verdict counts as.
BUCKETS = {
    PASSED: "verified",
    FINDING: "finding",
    SKIPPED: "skipped",
    FAILED: "failed/broken",
    BROKEN: "failed/broken",
    XPASS: "failed/broken",
    INCONCLUSIVE: "inconclusive",
    MISSING: "missing",
}
BUCKET_ORDER = ("verified", "finding", "inconclusive", "skipped", "failed/broken", "missing")
#: The release of raychaos results that carry no raychaos.ray_version parameter.
UNVERSIONED = "unversioned"


def verdict_of(test: TestResult) -> str:
    """passed, finding, finding gone, inconclusive, skipped, failed or broken (anything
    else)."""
    if test.strict_xpass:
        return XPASS
    status = test.effective_status
    return status if status in (PASSED, FINDING, INCONCLUSIVE, SKIPPED, FAILED) else BROKEN


def _names(test: TestResult, claim: str) -> bool:
    """Whether the failure message's first line names ``claim`` (``INV-01: resources …``)."""
    first = test.message.strip().splitlines()[0] if test.message.strip() else ""
    return re.search(rf"\b{re.escape(claim)}\b", first) is not None


def postconditions_failed(test: TestResult) -> bool:
    """Whether ``test`` failed in a postcondition's check, after its body passed.

    The teardown's ``check:`` steps say so when the results have them (:mod:`chaos.experiment`
    names them); without steps, the failure message names the postcondition.
    """
    if verdict_of(test) not in (FAILED, BROKEN):
        return False
    ran = [status for claim, status in test.checks if claim in POSTCONDITIONS]
    if ran:
        return any(status != PASSED for status in ran)
    return any(_names(test, c) for c in POSTCONDITIONS if c in test.claims)


def verdict_for(claim: str, test: TestResult) -> str:
    """``test``'s verdict on ``claim``, or :data:`NOT_JUDGED` when it never evaluated it.

    A postcondition (INV-01, INV-02) is checked at teardown, after a body that did not fail:
    on a recorded finding (or one gone) it held, since a violated one ends the result failed
    or broken; the body's finding is not its own. A failed or broken result judged it only
    when its check ran (its teardown step) or, in results without steps, when the failure
    names it: else the body (or an earlier check) failed first. The other way round, a
    failure in a postcondition's check came after the body passed: the body's claims held.
    """
    verdict = verdict_of(test)
    if claim not in POSTCONDITIONS:
        about = claim in test.finding_claims
        if postconditions_failed(test):
            if not test.finding:
                return PASSED  # the body held
            # A body that raised its finding did, but in a run that broke.
            return BROKEN if about else PASSED if claim in test.held else NOT_JUDGED
        if verdict == FINDING and not about:
            return PASSED if claim in test.held else NOT_JUDGED
        if verdict == XPASS and not about:
            return PASSED  # the whole body passed
        if verdict in (FAILED, BROKEN) and claim in test.held:
            return PASSED  # judged held before the body failed on something else
        return verdict
    if verdict in (FINDING, XPASS):
        return PASSED
    if verdict == INCONCLUSIVE:
        # The postconditions run after the body whatever the host did: a failed one fails
        # the result instead, so an inconclusive result's checks held.
        ran = {c: status for c, status in test.checks if c in POSTCONDITIONS}
        return PASSED if ran.get(claim) == PASSED else NOT_JUDGED
    if verdict not in (FAILED, BROKEN):
        return verdict
    ran = {c: status for c, status in test.checks if c in POSTCONDITIONS}
    if ran:
        if claim not in ran:
            return NOT_JUDGED
        return {PASSED: PASSED, FAILED: FAILED}.get(ran[claim], BROKEN)
    return verdict if _names(test, claim) else NOT_JUDGED


def worst(verdicts: Iterable[str]) -> str:
    ranked = [v for v in verdicts if v in VERDICT_ORDER]
    return min(ranked, key=VERDICT_ORDER.index) if ranked else MISSING


@dataclass(frozen=True)
class Cell:
    """One claim on one release: the worst verdict and the tests behind it."""

    verdict: str
    tests: tuple[TestResult, ...] = ()
    #: Each test's verdict on this cell's claim (see :func:`verdict_for`), in ``tests`` order.
    verdicts: tuple[str, ...] = ()
    #: Tests that carry the claim but did not judge it (:data:`NOT_JUDGED`): not in ``tests``.
    unjudged: tuple[TestResult, ...] = ()

    @property
    def shown(self) -> str:
        """The verdict, with how many of several tests reached it (``failed 1/2``)."""
        if not self.tests and self.unjudged:
            return NOT_JUDGED
        if len(self.tests) < 2:
            return self.verdict
        verdicts = self.verdicts or tuple(verdict_of(t) for t in self.tests)
        same = sum(1 for v in verdicts if v == self.verdict)
        return f"{self.verdict} {same}/{len(self.tests)}"

    def deciding(self) -> TestResult | None:
        """The first test whose verdict is the cell's: the one that decided it."""
        verdicts = self.verdicts or tuple(verdict_of(t) for t in self.tests)
        return next(
            (t for t, v in zip(self.tests, verdicts, strict=True) if v == self.verdict), None
        )


def raychaos_tests(results: Results) -> list[TestResult]:
    """Results raychaos wrote: they carry the ray_version parameter or a claim label. Every
    trial of ``--raychaos-trials`` counts (a claim is as good as its worst trial)."""
    tests = every_trial(results.runs) if results.runs else results.tests
    return [t for t in tests if t.ray_version or t.claims]


def release_of(test: TestResult) -> str:
    return test.ray_version or UNVERSIONED


def releases_of(tests: Iterable[TestResult]) -> list[str]:
    """The releases ``tests`` ran against, oldest first."""
    return sort_releases({release_of(t) for t in tests})


def load_raychaos(directory: Path) -> Results:
    """:func:`load_results`, refusing a directory without raychaos results (one line)."""
    results = load_results(directory)
    if not raychaos_tests(results):
        found = len(list(directory.glob("*-result.json")))
        raise ChaosError(
            f"{directory} holds no raychaos results ({found} Allure result file(s), none with "
            "a claim label or the raychaos.ray_version parameter)",
            hint="run the experiments with --alluredir=DIR first",
        )
    return results


def cells_of(tests: Iterable[TestResult], release: str) -> dict[str, Cell]:
    """claim id → its cell on ``release`` (claims without a result have no entry)."""
    found: dict[str, list[TestResult]] = {}
    for test in tests:
        if release_of(test) == release:
            for claim in test.claims:
                found.setdefault(claim, []).append(test)
    cells = {}
    for claim, group in found.items():
        judged = [(t, v) for t in group if (v := verdict_for(claim, t)) != NOT_JUDGED]
        cells[claim] = Cell(
            worst(v for _, v in judged),
            tuple(t for t, _ in judged),
            tuple(v for _, v in judged),
            tuple(t for t in group if verdict_for(claim, t) == NOT_JUDGED),
        )
    return cells


@dataclass(frozen=True)
class Coverage:
    directory: Path
    claims: tuple[str, ...]
    releases: tuple[str, ...]
    #: (claim, release) → cell; a cell without tests is MISSING.
    cells: Mapping[tuple[str, str], Cell]
    #: Claim ids in the results that the catalogue does not know.
    unknown: tuple[str, ...] = ()
    #: What was not counted, and why: one line per result whose message reads like a finding
    #: but carries no finding label.
    uncounted: tuple[str, ...] = ()

    def cell(self, claim: str, release: str) -> Cell:
        return self.cells.get((claim, release), Cell(MISSING))

    def counts(self, release: str) -> dict[str, int]:
        """Bucket → number of claims in it on ``release``."""
        counts = dict.fromkeys(BUCKET_ORDER, 0)
        for claim in self.claims:
            counts[BUCKETS[self.cell(claim, release).verdict]] += 1
        return counts

    def accounted(self, claim: str, *, strict: bool) -> bool:
        """Verified (or, unless ``strict``, a recorded finding) on every release."""
        good = {PASSED} if strict else {PASSED, FINDING}
        return all(self.cell(claim, r).verdict in good for r in self.releases)

    def inconclusive(self) -> tuple[str, ...]:
        """Claims not accounted for only because a run of theirs was inconclusive."""
        rels = self.releases
        return tuple(
            c
            for c in self.claims
            if not self.accounted(c, strict=False)
            and all(self.cell(c, r).verdict in (PASSED, FINDING, INCONCLUSIVE) for r in rels)
        )

    def exit_code(self, *, strict: bool) -> int:
        """1 when a claim is not accounted for — unless only because the host was too busy
        to judge it: an inconclusive claim is listed, never a red run."""
        apart = set(self.inconclusive())
        ok = all(self.accounted(c, strict=strict) or c in apart for c in self.claims)
        return 0 if ok else 1


def coverage(results: Results, catalogue: Catalogue, claims: Sequence[str] = ()) -> Coverage:
    """Coverage of ``claims`` (default: the whole catalogue) over every release present."""
    tests = raychaos_tests(results)
    releases = releases_of(tests)
    chosen = tuple(claims) or catalogue.ids
    cells = {
        (claim, release): cell
        for release in releases
        for claim, cell in cells_of(tests, release).items()
    }
    unknown = sorted({c for t in tests for c in t.claims if c not in catalogue})
    return Coverage(
        results.directory, chosen, tuple(releases), cells, tuple(unknown), uncounted_of(tests)
    )


def uncounted_of(tests: Iterable[TestResult]) -> tuple[str, ...]:
    """A line per result that reads like a finding but is not counted as one (a skip)."""
    return tuple(
        f"{t.full_name} [{release_of(t)}] ({', '.join(t.claims) or 'no claim'}): its message "
        "says 'XFAIL FINDING:' but it has no raychaos.finding label (written by an older "
        "raychaos, an imperative or non-strict xfail, or an exception the xfail does not "
        "name): counted as skipped"
        for t in tests
        if t.unlabelled_finding
    )


def render_text(cov: Coverage, *, strict: bool) -> str:
    """The claim × release table, a count line per release and the verdict."""
    width = max([len(c) for c in cov.claims] + [5]) + 2
    col = max([len(r) for r in cov.releases] + [len("finding gone 2/2")]) + 2
    lines = [
        f"raychaos coverage of {cov.directory}: {len(cov.claims)} claims × Ray "
        f"{', '.join(cov.releases)}",
        "",
        "claim".ljust(width) + "".join(r.ljust(col) for r in cov.releases).rstrip(),
    ]
    for claim in cov.claims:
        row = "".join(cov.cell(claim, r).shown.ljust(col) for r in cov.releases)
        mark = "" if cov.accounted(claim, strict=strict) else "  ✗"
        lines.append(f"{claim.ljust(width)}{row.rstrip()}{mark}")
    lines.append("")
    for release in cov.releases:
        counts = cov.counts(release)
        lines.append(f"Ray {release}: " + ", ".join(f"{n} {b}" for b, n in counts.items()))
    done = sum(1 for c in cov.claims if cov.accounted(c, strict=strict))
    rule = "verified" if strict else "verified or a recorded finding"
    lines.append(f"accounted for ({rule}) on every release: {done}/{len(cov.claims)} claims")
    if cov.unknown:
        lines.append(f"not in the claim catalogue: {', '.join(cov.unknown)}")
    if cov.inconclusive():
        lines.append(
            f"inconclusive (the host too busy to judge; not verified, not failed): "
            f"{', '.join(cov.inconclusive())}"
        )
    if cov.uncounted:
        lines.append(f"not counted as findings ({len(cov.uncounted)}):")
        lines += [f"  {line}" for line in cov.uncounted]
    return "\n".join(lines)
