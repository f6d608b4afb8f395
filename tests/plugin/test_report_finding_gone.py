"""A recorded finding that no longer reproduces is filed as such, never as a failure, in Allure
and in `raychaos report`; the harness's actions are Allure steps with human titles.

Real pytest runs through allure-pytest (no Docker): a strict xfail that passes, one that fails
as recorded, and a test that drives the nemesis runner and a bounded wait on a stand-in
cluster (the runner reaches the cluster only through its history here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from chaos.cli import main
from chaos.report.categories import FINDING, FINDING_GONE

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = '''
from types import SimpleNamespace

import pytest

from chaos.nemesis.base import Fault, Runner
from chaos.history import History
from chaos.waits import wait_until


class Crash(Fault):
    kind = "kill_node"
    permanent = True

    def __init__(self, node):
        self.node = node

    @property
    def target(self):
        return self.node

    def inject(self, cluster):
        pass

    def verify(self, cluster):
        pass


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="FINDING: not retried within 60 s")
def test_fixed_finding():
    """The partitioned task is retried now."""


@pytest.mark.claim("PEND-05")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="FINDING: no exit within 300 s")
def test_finding():
    raise AssertionError("ray start still running after 300 s")


@pytest.mark.claim("NODE-01")
def test_steps():
    runner = Runner(SimpleNamespace(history=History()))
    fault = runner.inject(Crash("worker-1"))
    wait_until(lambda: None, 5, "worker-1 DEAD")
    runner.heal(fault)


def test_not_ours():
    """No claim, no raychaos fixture: the plugin leaves it alone."""
'''


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[str(data["name"])] = data
    return found


def _category(categories: list[dict[str, Any]], result: dict[str, Any]) -> str | None:
    """The category Allure files ``result`` under: the first that matches (Java ``matches``)."""
    message = (result.get("statusDetails") or {}).get("message") or ""
    for category in categories:
        if result["status"] in category["matchedStatuses"] and re.fullmatch(
            category["messageRegex"], message
        ):
            return str(category["name"])
    return None


@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["single", "xdist"])
def test_a_strict_xfail_that_passes_is_a_finding_no_longer_reproduced(
    pytester: pytest.Pytester, tmp_path: Path, xdist: list[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-p", "no:randomly", *xdist
    )
    run.assert_outcomes(passed=2, failed=1, xfailed=1)
    run.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] FINDING: not retried within 60 s*"])
    results = _results(alluredir)
    assert set(results) == {
        "[NET-01] test_fixed_finding",
        "[PEND-05] test_finding",
        "[NODE-01] test_steps",
        "test_not_ours",
    }
    gone = results["[NET-01] test_fixed_finding"]
    assert gone["status"] == "failed"
    assert gone["statusDetails"]["message"] == "[XPASS(strict)] FINDING: not retried within 60 s"
    assert "remove the xfail marker" in gone["statusDetails"]["trace"]
    categories = json.loads((alluredir / "categories.json").read_text())
    assert _category(categories, gone) == FINDING_GONE
    assert _category(categories, results["[PEND-05] test_finding"]) == FINDING
    assert _category(categories, results["[NODE-01] test_steps"]) is None

    steps = [(s["name"], s["status"]) for s in results["[NODE-01] test_steps"]["steps"]]
    assert steps == [
        ("inject: kill node worker-1 (SIGKILL)", "passed"),
        ("verify: kill node worker-1 (SIGKILL) took effect ≤ 20 s", "passed"),
        ("wait: worker-1 DEAD ≤ 5 s", "passed"),
        ("heal: kill node worker-1 (SIGKILL) over (nothing to undo)", "passed"),
    ]
    assert "steps" not in results["test_not_ours"]

    # `raychaos report` files it the same way: not among the failures; exit 1 (update it).
    page = tmp_path / "summary.html"
    assert main(["report", str(alluredir), "-o", str(page)]) == 1
    text = page.read_text()
    failures = text.split("<h2>Failures and broken experiments</h2>", 1)[1].split("<h2>", 1)[0]
    assert "None." in failures
    section = text.split("<h2>Findings no longer reproduced</h2>", 1)[1].split("<h2>", 1)[0]
    assert "[NET-01] test_fixed_finding" in section and FINDING_GONE in section


def test_steps_are_harmless_without_an_alluredir(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    run.assert_outcomes(passed=2, failed=1, xfailed=1)


SETUP_FAILS = '''
import pytest

from chaos.errors import WorkloadTimeout


class NotRetried(AssertionError):
    """The finding's own symptom."""


@pytest.fixture
def cluster_that_never_boots():
    raise WorkloadTimeout("workload did not report 'attempt' within 120 s")


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(strict=True, raises=NotRetried, reason="FINDING: not retried within 60 s")
def test_workload_fails_before_the_fault():
    raise WorkloadTimeout("workload did not report 'attempt' within 120 s")


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(strict=True, raises=NotRetried, reason="FINDING: not retried within 60 s")
def test_fixture_fails_before_the_fault(cluster_that_never_boots):
    pass


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(strict=True, raises=NotRetried, reason="FINDING: not retried within 60 s")
def test_plain_assertion_before_the_fault():
    assert False, "the task must start on worker-1"


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(strict=True, raises=NotRetried, reason="FINDING: not retried within 60 s")
def test_the_finding_itself():
    raise NotRetried("60 s after DEAD the only attempt is still RUNNING")
'''


def test_a_strict_xfail_is_satisfied_only_by_its_finding_never_by_a_set_up_failure(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """`raises=` names the finding's own exception: a workload timeout, a fixture error or an
    ordinary assertion before the fault is reported as it is (broken or failed, in pytest, in
    Allure and in `raychaos report`), never as the finding."""
    pytester.makepyfile(test_suite=SETUP_FAILS)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist"
    )
    run.assert_outcomes(failed=2, errors=1, xfailed=1)
    results = _results(alluredir)
    categories = json.loads((alluredir / "categories.json").read_text())
    status = {name: r["status"] for name, r in results.items()}
    assert status == {
        "[NET-01] test_workload_fails_before_the_fault": "broken",
        "[NET-01] test_fixture_fails_before_the_fault": "broken",
        "[NET-01] test_plain_assertion_before_the_fault": "failed",
        "[NET-01] test_the_finding_itself": "skipped",
    }
    for name, result in results.items():
        category = _category(categories, result)
        if name.endswith("test_the_finding_itself"):
            assert category == FINDING
        else:
            assert category not in (FINDING, FINDING_GONE), (name, category)
    page = tmp_path / "summary.html"
    assert main(["report", str(alluredir), "-o", str(page)]) == 1
