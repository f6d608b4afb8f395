"""What coverage counts as a recorded finding, and what a failed postcondition voids.

Issue 24: coverage recognised a finding by its message (``FINDING:`` on a skipped result), so
a ``pytest.skip("FINDING: …")`` counted; and when a finding's body was followed by a failed
INV-01/INV-02 at teardown, allure-pytest kept the result "skipped: XFAIL FINDING" (it lets a
teardown failure override only a passed result), so coverage counted the finding as accounted
for and the postconditions as verified.

Real pytest runs through allure-pytest, no Docker: the ``postconditions`` fixture below does
at teardown what the ``experiment`` fixture does (label INV-01/INV-02, check them in
``check: INV-…`` steps, INV-02 first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.report.catalogue import load_catalogue
from chaos.report.claims import FINDING_LABEL, SCHEMA, SCHEMA_LABEL
from chaos.report.coverage import (
    BROKEN,
    FAILED,
    FINDING,
    NOT_JUDGED,
    PASSED,
    SKIPPED,
    coverage,
    load_raychaos,
    verdict_for,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

POSTCONDITIONS = """
import pytest

from chaos.errors import CheckFailed
from chaos.plugin.allure_labels import label_claims
from chaos.steps import step

DIED = "INV-02: nodes died that the experiment did not kill: worker-2 (missed heartbeats)"


@pytest.fixture
def postconditions(request):
    yield
    label_claims(["INV-01", "INV-02"])
    with step("check: INV-02 no node died that the experiment did not take down"):
        if request.node.get_closest_marker("violates") is not None:
            raise CheckFailed(DIED)
    with step("check: INV-01 available CPU back to total, no placement-group resources"):
        pass


@pytest.mark.claim("NET-01")
@pytest.mark.violates
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="FINDING: not retried within 60 s")
def test_finding_then_a_node_died(postconditions):
    raise AssertionError("the only attempt is still RUNNING on the DEAD node")


@pytest.mark.claim("PEND-05")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="FINDING: no exit within 300 s")
def test_finding_then_postconditions_hold(postconditions):
    raise AssertionError("ray start still running after 300 s")


@pytest.mark.claim("NODE-01")
@pytest.mark.violates
def test_passed_then_a_node_died(postconditions):
    pass
"""

LOOKALIKES = """
import pytest


@pytest.mark.claim("TASK-01")
def test_skip_saying_finding():
    pytest.skip("FINDING: retried only twice")


@pytest.mark.claim("TASK-02")
def test_imperative_xfail():
    pytest.xfail("FINDING: the budget is ignored")


@pytest.mark.claim("TASK-03")
@pytest.mark.xfail(raises=AssertionError, reason="FINDING: not strict")
def test_not_strict():
    raise AssertionError("seen")


@pytest.mark.claim("TASK-04")
@pytest.mark.xfail(strict=True, reason="FINDING: no raises=")
def test_no_raises():
    raise AssertionError("seen")


@pytest.mark.claim("NODE-01")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="flaky on CI")
def test_not_a_finding_reason():
    raise AssertionError("seen")


class NotRetried(AssertionError):
    pass


@pytest.mark.claim("TASK-05")
@pytest.mark.xfail(strict=True, raises=NotRetried, reason="FINDING: not retried")
def test_recorded():
    raise NotRetried("the task was not retried")
"""


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def _run(pytester: pytest.Pytester, suite: str, *args: str) -> tuple[pytest.RunResult, Path]:
    pytester.makeini("[pytest]\nmarkers =\n    violates: INV-02 fails at teardown\n")
    pytester.makepyfile(test_suite=suite)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-p", "no:randomly", *args
    )
    return run, alluredir


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[str(data["fullName"]).rsplit("#", 1)[-1]] = data
    return found


def _labels(result: dict[str, Any], name: str) -> list[str]:
    return [x["value"] for x in result["labels"] if x["name"] == name]


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["single", "xdist"])
def test_a_postcondition_failing_after_a_finding_counts_neither(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    run, alluredir = _run(pytester, POSTCONDITIONS, *xdist)
    # pytest applies raises= to the teardown too: the plugin keeps INV-02's failure an error.
    run.assert_outcomes(passed=1, xfailed=2, errors=2)
    run.stdout.fnmatch_lines(["*ERROR at teardown of test_finding_then_a_node_died*"])
    results = _results(alluredir)
    voided = results["test_finding_then_a_node_died"]
    # The teardown's failure, not "skipped: XFAIL FINDING"; the body's finding stays said.
    assert voided["status"] == "failed"
    message = voided["statusDetails"]["message"]
    assert message.startswith("chaos.errors.CheckFailed: INV-02: nodes died"), message
    assert "After the body's recorded finding (XFAIL FINDING: not retried" in message
    assert _labels(voided, FINDING_LABEL) == ["AssertionError"]
    kept = results["test_finding_then_postconditions_hold"]
    assert kept["status"] == "skipped" and _labels(kept, FINDING_LABEL) == ["AssertionError"]

    loaded = load_raychaos(alluredir)
    tests = {t.full_name.rsplit("#", 1)[-1]: t for t in loaded.tests}
    finding_then_died = tests["test_finding_then_a_node_died"]
    assert finding_then_died.effective_status == "failed"
    # Neither the finding nor the postconditions count from that result.
    assert verdict_for("NET-01", finding_then_died) == BROKEN
    assert verdict_for("INV-02", finding_then_died) == FAILED
    assert verdict_for("INV-01", finding_then_died) == NOT_JUDGED
    # A finding whose postconditions held is still one, and they were verified.
    held = tests["test_finding_then_postconditions_hold"]
    assert [verdict_for(c, held) for c in ("PEND-05", "INV-01", "INV-02")] == [
        FINDING,
        PASSED,
        PASSED,
    ]
    # After a body that passed, as before: the body held, the postcondition failed.
    passed_then_died = tests["test_passed_then_a_node_died"]
    assert (verdict_for("NODE-01", passed_then_died), verdict_for("INV-02", passed_then_died)) == (
        PASSED,
        FAILED,
    )
    cov = coverage(loaded, load_catalogue(), ["NET-01", "PEND-05", "INV-01", "INV-02"])
    assert not cov.accounted("NET-01", strict=False)
    assert cov.accounted("PEND-05", strict=False)
    assert cov.cell("INV-02", cov.releases[0]).verdict == FAILED


def test_only_a_strict_finding_xfail_with_raises_counts_as_a_finding(
    pytester: pytest.Pytester,
) -> None:
    run, alluredir = _run(pytester, LOOKALIKES, "-p", "no:xdist")
    run.assert_outcomes(skipped=1, xfailed=5)
    results = _results(alluredir)
    assert {name: _labels(r, FINDING_LABEL) for name, r in results.items()} == {
        "test_skip_saying_finding": [],
        "test_imperative_xfail": [],
        "test_not_strict": [],
        "test_no_raises": [],
        "test_not_a_finding_reason": [],
        "test_recorded": ["NotRetried"],
    }
    assert all(_labels(r, SCHEMA_LABEL) == [SCHEMA] for r in results.values())
    cov = coverage(load_raychaos(alluredir), load_catalogue(), [])
    release = cov.releases[0]
    shown = {c: cov.cell(c, release).verdict for c in ("TASK-01", "TASK-02", "TASK-03")}
    shown |= {c: cov.cell(c, release).verdict for c in ("TASK-04", "TASK-05", "NODE-01")}
    assert shown == {
        "TASK-01": SKIPPED,
        "TASK-02": SKIPPED,
        "TASK-03": SKIPPED,
        "TASK-04": SKIPPED,
        "TASK-05": FINDING,
        "NODE-01": SKIPPED,
    }
    assert [c for c in shown if cov.accounted(c, strict=False)] == ["TASK-05"]
