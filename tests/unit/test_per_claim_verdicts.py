"""Per-claim verdicts (issue 32) over synthetic Allure results, as raychaos writes them.

A finding is about the claims its exception names (``raychaos.finding.claim`` labels); every
other claim of its test is passed where the body recorded it held (a passed ``verdict: <claim>
held — …`` step), else *not judged* — never a finding. A failed body leaves the claims it had
recorded held passed. Only the ``raychaos.finding`` label makes a finding: a result whose
message reads ``XFAIL FINDING:`` without it is a skip, and ``raychaos coverage`` lists it.
Coverage, the claims matrix, compare, the report page, the trials table and the evidence
files all read the same per-claim verdict (:func:`chaos.report.coverage.verdict_for`).

``finding_mark`` (what the plugin labels at set-up) is checked on stand-in items here, on a
real pytest run in tests/plugin/test_per_claim_findings.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import pytest
from test_compare import Results, raychaos

from chaos.errors import Finding, RaceLost
from chaos.plugin.allure_labels import finding_mark
from chaos.report.catalogue import load_catalogue
from chaos.report.categories import INTERMITTENT, INTERMITTENT_PREFIX
from chaos.report.claims import INCONCLUSIVE_LABEL
from chaos.report.compare import MISSING_ONE_SIDE, NEW_FINDING, UNCHANGED, compare, pick_sides
from chaos.report.coverage import (
    BROKEN,
    FAILED,
    FINDING,
    MISSING,
    NOT_JUDGED,
    PASSED,
    SKIPPED,
    coverage,
    load_raychaos,
    render_text,
    verdict_for,
    verdict_of,
)
from chaos.report.evidence import export
from chaos.report.html import write_report
from chaos.report.matrix import claim_matrix
from chaos.report.model import load_results
from chaos.report.stats import trial_groups
from chaos.report.trials_html import held_per_claim

V = "2.60.0"
#: A finding about GCS-01 in a test that also judges GCS-04, as allure-pytest and the plugin
#: write it: skipped, "XFAIL FINDING: …", labelled with its exception and the claim it is about.
GCS_MSG = "XFAIL FINDING: the head was not back within 60 s\n\nHeadNotBack: still DEAD"


def _gcs(r: Results, *, held: bool, version: str = V, **kwargs: Any) -> None:
    r.add(
        "test_head_restart",
        version,
        ("GCS-01", "GCS-04"),
        kwargs.pop("status", "skipped"),
        kwargs.pop("message", GCS_MSG),
        finding="HeadNotBack",
        about=("GCS-01",),
        held=("GCS-04",) if held else (),
        **kwargs,
    )


def _cells(directory: Path, *claims: str) -> dict[str, str]:
    cov = coverage(load_raychaos(directory), load_catalogue(), list(claims))
    return {c: cov.cell(c, V).shown for c in claims}


# -- a finding about one claim, another claim held or not ------------------------------------
def test_a_finding_about_one_claim_leaves_a_claim_recorded_held_passed(tmp_path: Path) -> None:
    r = Results(tmp_path / "r")
    _gcs(r, held=True)
    (test,) = load_results(r.directory).tests
    assert test.finding and test.finding_claims == ("GCS-01",) and test.held == ("GCS-04",)
    assert verdict_of(test) == FINDING
    assert (verdict_for("GCS-01", test), verdict_for("GCS-04", test)) == (FINDING, PASSED)
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["GCS-01", "GCS-04"])
    assert (cov.cell("GCS-01", V).verdict, cov.cell("GCS-04", V).verdict) == (FINDING, PASSED)
    assert cov.accounted("GCS-04", strict=True)
    assert cov.accounted("GCS-01", strict=False) and not cov.accounted("GCS-01", strict=True)
    assert {bucket: n for bucket, n in cov.counts(V).items() if n} == {"verified": 1, "finding": 1}
    cells = claim_matrix([test], ["GCS-01", "GCS-04"], [V])
    assert (cells[("GCS-01", V)].status, cells[("GCS-04", V)].status) == (FINDING, PASSED)


def test_without_its_held_step_the_other_claim_is_not_judged_never_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Results(tmp_path / "r")
    _gcs(r, held=False)
    (test,) = load_results(r.directory).tests
    assert test.held == ()
    assert (verdict_for("GCS-01", test), verdict_for("GCS-04", test)) == (FINDING, NOT_JUDGED)
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["GCS-01", "GCS-04"])
    cell = cov.cell("GCS-04", V)
    assert (cell.verdict, cell.shown, cell.tests) == (MISSING, NOT_JUDGED, ())
    assert [t.name for t in cell.unjudged] == ["test_head_restart[2.60.0]"]
    assert not cov.accounted("GCS-04", strict=False)
    assert cov.counts(V)["finding"] == 1 and cov.counts(V)["missing"] == 1
    assert re.search(r"^GCS-04 +not judged +✗$", render_text(cov, strict=False), re.M)
    cells = claim_matrix([test], ["GCS-01", "GCS-04"], [V])
    assert cells[("GCS-04", V)].status == NOT_JUDGED
    assert cells[("GCS-04", V)].unjudged == ("test_head_restart[2.60.0]",)
    assert raychaos("coverage", str(r.directory), "--claims", "GCS-0[14]") == 1
    assert re.search(r"^GCS-04 +not judged +✗$", capsys.readouterr().out, re.M)


def test_a_held_step_that_failed_records_nothing(tmp_path: Path) -> None:
    """Only a passed ``verdict:`` step says the claim held."""
    r = Results(tmp_path / "r")
    _gcs(r, held=False)
    path = next(r.directory.glob("*-result.json"))
    data = json.loads(path.read_text())
    data["steps"] = [{"name": "verdict: GCS-04 held — x", "status": "failed"}]
    path.write_text(json.dumps(data))
    (test,) = load_results(r.directory).tests
    assert test.held == () and verdict_for("GCS-04", test) == NOT_JUDGED


def test_held_steps_are_read_at_any_depth(tmp_path: Path) -> None:
    r = Results(tmp_path / "r")
    _gcs(r, held=False)
    path = next(r.directory.glob("*-result.json"))
    data = json.loads(path.read_text())
    inner = {"name": "verdict: GCS-04 held — restarted in 4.1 s", "status": "passed"}
    data["steps"] = [{"name": "workload: wait", "status": "passed", "steps": [inner]}]
    path.write_text(json.dumps(data))
    (test,) = load_results(r.directory).tests
    assert test.held == ("GCS-04",) and verdict_for("GCS-04", test) == PASSED


@pytest.mark.parametrize("status", [FAILED, BROKEN])
def test_a_failed_body_leaves_the_claims_it_recorded_held_passed(
    tmp_path: Path, status: str
) -> None:
    r = Results(tmp_path / "r")
    message = (
        "AssertionError: TASK-02 retried 4 times, budget 3"
        if status == FAILED
        else "KeyError: 'attempts'"
    )
    claims = ("TASK-01", "TASK-02", "TASK-03", "INV-01", "INV-02")
    r.add("test_retries", V, claims, status, message, held=("TASK-01",))
    (test,) = load_results(r.directory).tests
    verdicts = {c: verdict_for(c, test) for c in claims}
    # TASK-01 held before the body failed; the rest of the body is the failure's; the
    # postconditions never ran after a failed body.
    assert verdicts == {
        "TASK-01": PASSED,
        "TASK-02": status,
        "TASK-03": status,
        "INV-01": NOT_JUDGED,
        "INV-02": NOT_JUDGED,
    }
    assert _cells(r.directory, "TASK-01", "TASK-02", "TASK-03") == {
        "TASK-01": PASSED,
        "TASK-02": status,
        "TASK-03": status,
    }
    cells = claim_matrix([test], list(claims), [V])
    assert cells[("TASK-01", V)].status == PASSED
    assert cells[("TASK-02", V)].status == status


@pytest.mark.parametrize("held", [True, False], ids=["held", "not-held"])
def test_a_postcondition_failing_after_a_finding_breaks_only_the_finding_s_claims(
    tmp_path: Path, held: bool
) -> None:
    """The plugin turns such a result into the teardown's failure, keeping its finding label:
    the claim the finding is about is broken (not accounted for by a run that broke), a claim
    recorded held stays passed, any other is not judged."""
    r = Results(tmp_path / "r")
    r.add(
        "test_head_restart",
        V,
        ("GCS-01", "GCS-04", "INV-01", "INV-02"),
        "failed",
        "chaos.errors.CheckFailed: INV-02: nodes died that the experiment did not kill",
        finding="HeadNotBack",
        about=("GCS-01",),
        held=("GCS-04",) if held else (),
    )
    (test,) = load_results(r.directory).tests
    assert [verdict_for(c, test) for c in ("GCS-01", "GCS-04", "INV-02")] == [
        BROKEN,
        PASSED if held else NOT_JUDGED,
        FAILED,
    ]


def test_a_finding_without_claim_labels_is_about_every_claim_of_its_test(tmp_path: Path) -> None:
    """Results labelled before findings named their claims (schema 2), or a finding class
    with no claims of this test: the finding is every claim's."""
    r = Results(tmp_path / "r")
    r.add("test_head_restart", V, ("GCS-01", "GCS-04"), "skipped", GCS_MSG, finding="X")
    (test,) = load_results(r.directory).tests
    assert test.finding_claims == ("GCS-01", "GCS-04")
    assert _cells(r.directory, "GCS-01", "GCS-04") == {"GCS-01": FINDING, "GCS-04": FINDING}


def test_a_strict_xpass_leaves_every_claim_not_about_it_passed(tmp_path: Path) -> None:
    r = Results(tmp_path / "r")
    r.add(
        "test_head_restart",
        V,
        ("GCS-01", "GCS-04"),
        "failed",
        "[XPASS(strict)] FINDING: the head was not back within 60 s",
        about=("GCS-01",),
    )
    (test,) = load_results(r.directory).tests
    assert not test.finding and test.finding_claims == ("GCS-01",)
    assert (verdict_for("GCS-01", test), verdict_for("GCS-04", test)) == ("finding gone", PASSED)


# -- only the label counts --------------------------------------------------------------------
def test_an_unlabelled_xfail_finding_is_a_skip_that_coverage_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Results(tmp_path / "r")
    # No schema label, no finding label: an older raychaos, or a non-strict xfail.
    r.add("test_node_death", V, ("TASK-04",), "skipped", "XFAIL FINDING: x\n\nAssertionError: y")
    r.add(
        "test_recorded",
        V,
        ("TASK-05",),
        "skipped",
        "XFAIL FINDING: not retried\n\nNotRetried: z",
        finding="NotRetried",
    )
    (old, new) = sorted(load_results(r.directory).tests, key=lambda t: t.name)
    assert old.unlabelled_finding and not old.finding and old.schema is None
    assert verdict_of(old) == SKIPPED and verdict_for("TASK-04", old) == SKIPPED
    assert new.finding and not new.unlabelled_finding and new.schema == "3"
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["TASK-04", "TASK-05"])
    assert (cov.cell("TASK-04", V).verdict, cov.cell("TASK-05", V).verdict) == (SKIPPED, FINDING)
    assert not cov.accounted("TASK-04", strict=False)
    (line,) = cov.uncounted
    assert line.startswith("experiments.test_x#test_node_death [2.60.0] (TASK-04): ")
    assert "no raychaos.finding label" in line and "counted as skipped" in line
    text = render_text(cov, strict=False)
    assert "not counted as findings (1):" in text and f"  {line}" in text
    assert raychaos("coverage", str(r.directory), "--claims", "TASK-0[45]") == 1
    out = capsys.readouterr().out
    assert re.search(r"^TASK-04 +skipped +✗$", out, re.M), out
    assert "not counted as findings (1):" in out
    assert "experiments.test_x#test_node_death [2.60.0] (TASK-04)" in out


# -- intermittent findings --------------------------------------------------------------------
def test_an_intermittent_finding_has_its_own_category_and_counts_as_a_finding(
    tmp_path: Path,
) -> None:
    r = Results(tmp_path / "r")
    r.add(
        "test_sigterm",
        V,
        ("CHURN-05",),
        "skipped",
        f"{INTERMITTENT_PREFIX} (RetryCounted): the retry was counted\n\nRetryCounted: 2",
        finding="RetryCounted",
    )
    # A run of a non-strict xfail whose race went Ray's documented way: allure-pytest's XPASS.
    r.add("test_won", V, ("CHURN-03",), "passed", "XPASS FINDING: the retry was counted")
    tests = {t.name: t for t in load_results(r.directory).tests}
    lost = tests["test_sigterm[2.60.0]"]
    assert lost.category == INTERMITTENT and lost.effective_status == FINDING
    assert verdict_for("CHURN-05", lost) == FINDING
    won = tests["test_won[2.60.0]"]
    assert won.effective_status == PASSED and verdict_for("CHURN-03", won) == PASSED
    assert _cells(r.directory, "CHURN-05", "CHURN-03") == {"CHURN-05": FINDING, "CHURN-03": PASSED}


def test_trials_say_how_often_each_claim_held(tmp_path: Path) -> None:
    """Three trials of a race: won twice (non-strict XPASS), lost once (the finding, about
    CHURN-05, after CHURN-03 was recorded held). CHURN-05 held in 2 of 3, CHURN-03 in 3."""
    r = Results(tmp_path / "r")
    claims = ("CHURN-03", "CHURN-05")
    for trial in (1, 3):
        r.add("test_sigterm", V, claims, "passed", "XPASS FINDING: x", about=("CHURN-05",), trial=trial)  # fmt: skip
    r.add(
        "test_sigterm",
        V,
        claims,
        "skipped",
        f"{INTERMITTENT_PREFIX} (RetryCounted): the retry was counted",
        finding="RetryCounted",
        about=("CHURN-05",),
        held=("CHURN-03",),
        trial=2,
    )
    (group,) = trial_groups(load_results(r.directory).runs)
    assert [t.trial for t in group.runs] == [1, 2, 3]
    assert (group.held("CHURN-05").successes, group.held("CHURN-05").n) == (2, 3)
    assert (group.held("CHURN-03").successes, group.held("CHURN-03").n) == (3, 3)
    assert held_per_claim(group) == "CHURN-03 held in 3 of 3; CHURN-05 held in 2 of 3"
    cov = coverage(load_raychaos(r.directory), load_catalogue(), list(claims))
    # A claim is as good as its worst trial: the lost race is the finding.
    assert cov.cell("CHURN-05", V).shown == "finding 1/3"
    assert cov.cell("CHURN-03", V).shown == "passed 3/3"
    page = tmp_path / "p.html"
    write_report(r.directory, page, load_catalogue())
    assert "CHURN-03 held in 3 of 3; CHURN-05 held in 2 of 3" in page.read_text()


def test_a_claim_not_recorded_held_in_a_lost_trial_was_not_judged_by_it(tmp_path: Path) -> None:
    r = Results(tmp_path / "r")
    claims = ("CHURN-03", "CHURN-05")
    r.add("test_sigterm", V, claims, "passed", "XPASS FINDING: x", about=("CHURN-05",), trial=1)
    r.add(
        "test_sigterm",
        V,
        claims,
        "skipped",
        f"{INTERMITTENT_PREFIX} (RetryCounted): x",
        finding="RetryCounted",
        about=("CHURN-05",),
        trial=2,
    )
    r.add("test_sigterm", V, claims, "broken", "ClusterBootTimeout: 1 of 3", trial=3)
    (group,) = trial_groups(load_results(r.directory).runs)
    # Trial 2 did not judge CHURN-03, trial 3 broke: neither decided anything about it.
    assert (group.held("CHURN-03").successes, group.held("CHURN-03").n) == (1, 1)
    assert (group.held("CHURN-05").successes, group.held("CHURN-05").n) == (1, 2)


# -- compare, the report page, the evidence files ---------------------------------------------
def _upgrade(tmp_path: Path, *, held: bool) -> Path:
    r = Results(tmp_path / "both")
    r.add("test_head_restart", "2.59.0", ("GCS-01", "GCS-04"))
    _gcs(r, held=held)
    return r.directory


def test_compare_judges_each_claim_of_a_finding_s_test_on_its_own(tmp_path: Path) -> None:
    result = compare(*pick_sides(_upgrade(tmp_path, held=True)), load_catalogue())
    rows = {row.claim: row for row in result.rows}
    assert (rows["GCS-01"].change, rows["GCS-01"].candidate.verdict) == (NEW_FINDING, FINDING)
    assert rows["GCS-01"].detail == "FINDING: the head was not back within 60 s"
    assert (rows["GCS-04"].change, rows["GCS-04"].candidate.verdict) == (UNCHANGED, PASSED)
    assert rows["GCS-04"].detail == ""


def test_compare_says_why_a_claim_was_not_judged(tmp_path: Path) -> None:
    result = compare(*pick_sides(_upgrade(tmp_path, held=False)), load_catalogue())
    row = next(r for r in result.rows if r.claim == "GCS-04")
    assert (row.base.verdict, row.candidate.shown, row.change) == (
        PASSED,
        NOT_JUDGED,
        MISSING_ONE_SIDE,
    )
    assert row.detail == (
        "not judged by test_head_restart on Ray 2.60.0: it ended in its finding about GCS-01 "
        "before recording GCS-04 held"
    )
    assert result.exit_code == 0


@pytest.mark.parametrize("held", [True, False], ids=["held", "not-held"])
def test_the_report_page_shows_each_claim_s_own_verdict(tmp_path: Path, held: bool) -> None:
    page = tmp_path / "p.html"
    write_report(_upgrade(tmp_path, held=held), page, load_catalogue())
    text = page.read_text()
    row = text.split("<tr><th>GCS-04</th>", 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r'<td class="s ([a-z]+)"[^>]*>([^<]*)</td>', row)
    assert cells == [("passed", "passed"), ("passed", "passed") if held else ("notrun", NOT_JUDGED)]
    row = text.split("<tr><th>GCS-01</th>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="s ([a-z]+)"', row) == ["passed", "finding"]
    findings = text.split("<h2>Findings</h2>", 1)[1].split("<h2>", 1)[0]
    other = "GCS-04 passed" if held else "GCS-04 not judged"
    assert f"about <b>GCS-01</b>; the test's other claims: {other}</div>" in findings
    # Verified: passed or a finding in every column; GCS-04 only when it was recorded held.
    summary = text.split("Claims verified", 1)[1].split("</p>", 1)[0]
    total = len(load_catalogue())
    assert summary.endswith(f"<b>2/{total}</b>" if held else f"<b>1/{total}</b>")


def test_evidence_keeps_each_claim_s_verdict(tmp_path: Path) -> None:
    r = Results(tmp_path / "r")
    _gcs(r, held=True)
    r.add("test_retries", V, ("TASK-01", "TASK-02"), "failed", "AssertionError: x", held=("TASK-01",))  # fmt: skip
    out = tmp_path / "data"
    assert export([r.directory], out) == {"gcs": 1, "task": 1}
    (gcs,) = json.loads((out / "gcs.json").read_text())["runs"]
    assert (gcs["status"], gcs["verdicts"]) == (FINDING, {"GCS-01": FINDING, "GCS-04": PASSED})
    (task,) = json.loads((out / "task.json").read_text())["runs"]
    assert task["verdicts"] == {"TASK-01": PASSED, "TASK-02": FAILED}


# -- finding_mark: which claims a finding is about --------------------------------------------
class _Item:
    """What finding_mark reads of a pytest item: its markers and the xfail_strict ini."""

    def __init__(self, *marks: pytest.MarkDecorator, xfail_strict: bool = False) -> None:
        self.marks = [m.mark for m in marks]
        self.config = SimpleNamespace(getini=lambda name: xfail_strict)

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]:
        return (m for m in self.marks if name is None or m.name == name)


class RetryCounted(RaceLost):
    claims: ClassVar[tuple[str, ...]] = ("CHURN-05",)


class HeadNotBack(Finding):
    claims: ClassVar[tuple[str, ...]] = ("GCS-01", "GCS-99")


class Elsewhere(Finding):
    claims: ClassVar[tuple[str, ...]] = ("NET-01",)


def _about(*marks: pytest.MarkDecorator, xfail_strict: bool = False) -> tuple[str, ...] | None:
    found = finding_mark(cast(pytest.Item, _Item(*marks, xfail_strict=xfail_strict)))
    return None if found is None else found.claims


def _xfail(raises: Any, *, strict: bool | None = True, reason: str = "FINDING: x") -> Any:
    if strict is None:
        return pytest.mark.xfail(raises=raises, reason=reason)
    return pytest.mark.xfail(strict=strict, raises=raises, reason=reason)


TWO = pytest.mark.claim("GCS-01", "GCS-04")


def test_finding_mark_keeps_the_claims_of_the_test_its_classes_name() -> None:
    # Only the test's claims the class names (GCS-99 is not the test's).
    assert _about(TWO, _xfail(HeadNotBack)) == ("GCS-01",)
    # A class naming none of the test's claims, or a plain exception: every claim.
    assert _about(TWO, _xfail(Elsewhere)) == ("GCS-01", "GCS-04")
    assert _about(TWO, _xfail(AssertionError)) == ("GCS-01", "GCS-04")
    # Several classes: the union of what they name.
    churn = pytest.mark.claim("CHURN-03", "CHURN-05", "GCS-01")
    assert _about(churn, _xfail((HeadNotBack, RetryCounted))) == ("CHURN-05", "GCS-01")
    # Claims of every claim marker (module, class, function) count.
    assert _about(
        pytest.mark.claim("GCS-04"), pytest.mark.claim("GCS-01"), _xfail(HeadNotBack)
    ) == ("GCS-01",)


def test_finding_mark_records_only_a_strict_or_an_intermittent_finding_xfail() -> None:
    churn = pytest.mark.claim("CHURN-03", "CHURN-05")
    # Non-strict: only when every class it names is Intermittent.
    assert _about(churn, _xfail(RetryCounted, strict=False)) == ("CHURN-05",)
    assert _about(churn, _xfail(AssertionError, strict=False)) is None
    assert _about(churn, _xfail((RetryCounted, AssertionError), strict=False)) is None
    # Without strict=, the ini's xfail_strict decides.
    assert _about(churn, _xfail(AssertionError, strict=None)) is None
    assert _about(churn, _xfail(AssertionError, strict=None), xfail_strict=True) == (
        "CHURN-03",
        "CHURN-05",
    )
    # Not a FINDING reason, or no raises=: nothing recorded.
    assert _about(churn, _xfail(RetryCounted, reason="flaky")) is None
    assert _about(churn, pytest.mark.xfail(strict=True, reason="FINDING: x")) is None
    # An xfail whose condition is false does not apply; the next one does.
    skipped = pytest.mark.xfail(False, strict=True, raises=AssertionError, reason="FINDING: y")
    assert _about(churn, skipped, _xfail(RetryCounted)) == ("CHURN-05",)
    assert _about(churn, skipped) is None


def test_finding_mark_matches_only_the_exception_it_names() -> None:
    item = cast(pytest.Item, _Item(TWO, _xfail(HeadNotBack)))
    found = finding_mark(item)
    assert found is not None
    assert found.matches(HeadNotBack("x")) and not found.matches(AssertionError("x"))
    assert not found.matches(pytest.xfail.Exception("FINDING: x"))


def test_compare_says_a_postcondition_of_an_inconclusive_run_was_not_judged(
    tmp_path: Path,
) -> None:
    r = Results(tmp_path / "both")
    r.add("test_kill", "2.59.0", ("NODE-01", "INV-01"))
    r.add("test_kill", V, ("NODE-01", "INV-01"), "broken", "INCONCLUSIVE: worker-1 stalled")
    path = sorted(r.directory.glob("test_kill-2.60.0-*-result.json"))[0]
    data = json.loads(path.read_text())
    data["labels"].append({"name": INCONCLUSIVE_LABEL, "value": "worker-1 3.1 of 5 s"})
    path.write_text(json.dumps(data))
    result = compare(*pick_sides(r.directory), load_catalogue())
    row = next(row for row in result.rows if row.claim == "INV-01")
    assert row.candidate.shown == NOT_JUDGED
    assert row.detail.endswith(
        "not judged by test_kill on Ray 2.60.0: its run was inconclusive (the host too busy to "
        "judge) and this check did not pass"
    )
