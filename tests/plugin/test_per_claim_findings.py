"""Per-claim findings through a real pytest run (allure-pytest and the plugin, no Docker).

Issue 32: every claim of a test that raised a finding read "finding". Now a finding is about
the claims its exception class names (``claims``, written at set-up as
``raychaos.finding.claim`` labels); a claim the body recorded held (``Experiment.held``: a
``verdict: <claim> held — …`` step) stays passed. A non-strict xfail counts only for an
:class:`~chaos.errors.Intermittent` (a race or crash inside Ray): the run that lost is the
finding, in its own Allure category; the run that won passes. Any other non-strict xfail whose
reason says FINDING records nothing, and coverage lists it as not counted.

The suites are plain tests with ``claim`` markers, like tests/plugin/test_report_finding_counted.py;
``held`` is the real :meth:`chaos.experiment.Experiment.held` on a kit without a cluster (it
records into a history and an Allure step, nothing else).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.report.catalogue import load_catalogue
from chaos.report.categories import INTERMITTENT, INTERMITTENT_PREFIX
from chaos.report.claims import FINDING_ABOUT_LABEL, FINDING_LABEL, SCHEMA, SCHEMA_LABEL
from chaos.report.coverage import (
    FINDING,
    NOT_JUDGED,
    PASSED,
    SKIPPED,
    coverage,
    load_raychaos,
    render_text,
    verdict_for,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
from types import SimpleNamespace
from typing import ClassVar

import pytest

from chaos.errors import Finding, RaceLost
from chaos.experiment import Experiment
from chaos.history import History


def kit():
    return Experiment(SimpleNamespace(history=History()), None, None)


class RetriedPastBudget(Finding):
    claims: ClassVar[tuple[str, ...]] = ("TASK-02",)


class RetryRaceLost(RaceLost):
    claims: ClassVar[tuple[str, ...]] = ("CHURN-05",)


@pytest.mark.claim("TASK-01", "TASK-02")
@pytest.mark.xfail(strict=True, raises=RetriedPastBudget, reason="FINDING: retried 4 times")
def test_held_then_found():
    kit().held("TASK-01", "retried within 6.3 s")
    raise RetriedPastBudget("TASK-02: 4 attempts, max_retries=3")


@pytest.mark.claim("TASK-03", "TASK-02")
@pytest.mark.xfail(strict=True, raises=RetriedPastBudget, reason="FINDING: retried 4 times")
def test_found_before_the_other_claim_was_judged():
    raise RetriedPastBudget("TASK-02: 4 attempts, max_retries=3")


@pytest.mark.claim("CHURN-03", "CHURN-05")
@pytest.mark.xfail(strict=False, raises=RetryRaceLost, reason="FINDING: the retry was counted")
def test_race_lost():
    kit().held("CHURN-03", "the preempted task re-ran")
    raise RetryRaceLost("the SIGTERM's retry was counted: 1 of 1")


@pytest.mark.claim("CHURN-03", "CHURN-05")
@pytest.mark.xfail(strict=False, raises=RetryRaceLost, reason="FINDING: the retry was counted")
def test_race_won():
    experiment = kit()
    experiment.held("CHURN-03", "the preempted task re-ran")
    experiment.held("CHURN-05", "the retry was not counted")


@pytest.mark.claim("CHURN-02")
@pytest.mark.xfail(strict=False, raises=AssertionError, reason="FINDING: not an Intermittent")
def test_plain_non_strict():
    raise AssertionError("no restart counted")
"""


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def _labels(result: dict[str, Any], name: str) -> list[str]:
    return sorted(x["value"] for x in result["labels"] if x["name"] == name)


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["single", "xdist"])
def test_findings_are_about_their_claims_and_intermittent_ones_alone_may_be_non_strict(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-p", "no:randomly", *xdist
    )
    run.assert_outcomes(xfailed=4, xpassed=1)
    results: dict[str, dict[str, Any]] = {}
    for path in Path(alluredir).glob("*-result.json"):
        data = json.loads(path.read_text())
        results[str(data["fullName"]).rsplit("#", 1)[-1]] = data
    assert all(_labels(r, SCHEMA_LABEL) == [SCHEMA] for r in results.values())
    # What the plugin labelled: the exception raised, and (at set-up) the claims it is about.
    labelled = {
        n: (_labels(r, FINDING_LABEL), _labels(r, FINDING_ABOUT_LABEL)) for n, r in results.items()
    }
    assert labelled == {
        "test_held_then_found": (["RetriedPastBudget"], ["TASK-02"]),
        "test_found_before_the_other_claim_was_judged": (["RetriedPastBudget"], ["TASK-02"]),
        "test_race_lost": (["RetryRaceLost"], ["CHURN-05"]),
        # Declared at set-up, before the body ran; the race went Ray's way: nothing raised.
        "test_race_won": ([], ["CHURN-05"]),
        # A non-strict xfail naming a plain AssertionError records nothing.
        "test_plain_non_strict": ([], []),
    }
    held = results["test_held_then_found"]
    verdicts = [s["name"] for s in held.get("steps", []) if s["name"].startswith("verdict:")]
    assert verdicts == ["verdict: TASK-01 held — retried within 6.3 s"]
    assert held["status"] == "skipped"
    assert held["statusDetails"]["message"].startswith("XFAIL FINDING: retried 4 times")
    lost = results["test_race_lost"]
    assert lost["status"] == "skipped"
    assert lost["statusDetails"]["message"].startswith(
        f"{INTERMITTENT_PREFIX} (RetryRaceLost): the retry was counted"
    )
    assert results["test_race_won"]["status"] == "passed"
    plain = results["test_plain_non_strict"]
    assert plain["status"] == "skipped"
    assert plain["statusDetails"]["message"].startswith("XFAIL FINDING: not an Intermittent")

    loaded = load_raychaos(alluredir)
    tests = {t.full_name.rsplit("#", 1)[-1]: t for t in loaded.tests}
    assert tests["test_race_lost"].category == INTERMITTENT
    assert tests["test_plain_non_strict"].unlabelled_finding
    per_test = {name: {c: verdict_for(c, t) for c in t.claims} for name, t in sorted(tests.items())}
    assert per_test == {
        "test_found_before_the_other_claim_was_judged": {"TASK-02": FINDING, "TASK-03": NOT_JUDGED},
        "test_held_then_found": {"TASK-01": PASSED, "TASK-02": FINDING},
        "test_plain_non_strict": {"CHURN-02": SKIPPED},
        "test_race_lost": {"CHURN-03": PASSED, "CHURN-05": FINDING},
        "test_race_won": {"CHURN-03": PASSED, "CHURN-05": PASSED},
    }
    claims = ["TASK-01", "TASK-02", "TASK-03", "CHURN-02", "CHURN-03", "CHURN-05"]
    cov = coverage(loaded, load_catalogue(), claims)
    release = cov.releases[0]
    assert {c: cov.cell(c, release).shown for c in claims} == {
        "TASK-01": PASSED,
        "TASK-02": f"{FINDING} 2/2",
        "TASK-03": NOT_JUDGED,
        "CHURN-02": SKIPPED,
        "CHURN-03": f"{PASSED} 2/2",
        # A claim is as good as its worst run: the lost race is the finding.
        "CHURN-05": f"{FINDING} 1/2",
    }
    assert [c for c in claims if cov.accounted(c, strict=False)] == [
        "TASK-01",
        "TASK-02",
        "CHURN-03",
        "CHURN-05",
    ]
    (uncounted,) = cov.uncounted
    assert "test_plain_non_strict" in uncounted and "(CHURN-02)" in uncounted
    assert "not counted as findings (1):" in render_text(cov, strict=False)


def test_a_finding_class_naming_a_claim_its_test_lacks_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    """A typo in ``Finding.claims`` would make the finding about every claim of its test:
    collection refuses it, naming the test, the class and the claim, before anything runs."""
    pytester.makepyfile(
        """
        from typing import ClassVar

        import pytest

        from chaos.errors import Finding


        class Typo(Finding):
            claims: ClassVar[tuple[str, ...]] = ("TASK-20",)


        @pytest.mark.claim("TASK-01", "TASK-02")
        @pytest.mark.xfail(strict=True, raises=Typo, reason="FINDING: x")
        def test_typo():
            raise Typo("x")
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*a finding's exception names a claim its test does not carry*",
         "*test_typo: Typo: TASK-20 is not among its claims (TASK-01, TASK-02)*"]
    )  # fmt: skip
