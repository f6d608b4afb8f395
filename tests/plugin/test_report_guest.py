"""Installed in another repository, raychaos leaves its Allure results alone unless used.

Runs without a raychaos test keep the repository's ``categories.json``,
``environment.properties``, ``executor.json`` and earlier results byte for byte; runs with one
merge raychaos' run-level files into the repository's instead of replacing them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.report.categories import CATEGORIES
from chaos.report.properties import parse_properties

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

TEAM_CATEGORIES = [
    {"name": "Team: flaky network", "matchedStatuses": ["failed"], "messageRegex": ".*reset.*"},
    # A stale copy of one of ours (an earlier raychaos run): replaced, not repeated.
    {"name": "Harness or Docker error", "matchedStatuses": ["broken"], "messageRegex": "old"},
]
TEAM_ENVIRONMENT = "# the team's\nteam.stage = staging\nray.version=stale\nteam.url=http\\://x\n"
TEAM_EXECUTOR = {"name": "Jenkins", "type": "jenkins", "buildName": "team #7"}
#: An earlier run's raychaos result: it must not make this run count as a raychaos run.
EARLIER = {
    "uuid": "earlier",
    "name": "test_earlier",
    "status": "passed",
    "start": 1000,
    "stop": 2000,
    "labels": [{"name": "claim", "value": "TASK-01"}],
    "parameters": [{"name": "raychaos.ray_version", "value": "'2.1.0'", "excluded": True}],
}

PLAIN_SUITE = """
import os
import pytest


@pytest.fixture
def experiment():
    '''The team's own fixture, named like raychaos' one.'''
    return "theirs"


@pytest.fixture
def docker_client():
    return "theirs too"


def test_ok():
    pass


def test_fails():
    assert False, "connection reset"


def test_own_experiment(experiment, docker_client):
    assert experiment == "theirs"


@pytest.mark.parametrize("ray_version", ["2.1.0"])
def test_own_ray_version_parameter(ray_version):
    pass


def test_crashes():
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os._exit(1)
"""

RAYCHAOS_SUITE = """
import pytest


@pytest.mark.claim("GCS-01")
def test_ours():
    '''The head survives.'''


def test_theirs():
    pass
"""


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def _team_alluredir(root: Path) -> tuple[Path, dict[str, bytes]]:
    alluredir = root / "allure-results"
    (alluredir / "history").mkdir(parents=True)
    files = {
        "categories.json": json.dumps(TEAM_CATEGORIES, indent=2),
        "environment.properties": TEAM_ENVIRONMENT,
        "executor.json": json.dumps(TEAM_EXECUTOR),
        "earlier-result.json": json.dumps(EARLIER),
        "history/history.json": "{}",
    }
    for name, text in files.items():
        (alluredir / name).write_text(text)
    return alluredir, {name: (alluredir / name).read_bytes() for name in files}


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[str(data["name"])] = data
    return found


def test_a_run_without_raychaos_tests_touches_nothing(pytester: pytest.Pytester) -> None:
    """Under xdist, with a worker crash and fixtures named like raychaos' own."""
    alluredir, before = _team_alluredir(pytester.path)
    pytester.makepyfile(test_plain=PLAIN_SUITE)
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-n", "2"
    )
    run.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*test_crashes*"])
    run.assert_outcomes(passed=3, failed=2)
    assert "raychaos: WARNING" not in run.stdout.str() + run.stderr.str()
    for name, content in before.items():
        assert (alluredir / name).read_bytes() == content, name
    results = _results(alluredir)
    # allure-pytest's results, plus the earlier one; nothing for the crash (not ours to write).
    assert set(results) == {
        "test_ok",
        "test_fails",
        "test_own_experiment",
        "test_own_ray_version_parameter[2.1.0]",
        "test_earlier",
    }
    for name, result in results.items():
        if name != "test_earlier":
            text = json.dumps(result)
            assert '"claim"' not in text and '"excluded": true' not in text, name


def test_a_raychaos_run_merges_into_the_team_files(pytester: pytest.Pytester) -> None:
    """Twice into the same directory: the merge is stable, nothing is repeated."""
    alluredir, before = _team_alluredir(pytester.path)
    pytester.makepyfile(test_mixed=RAYCHAOS_SUITE)
    ours = [c.to_allure() for c in CATEGORIES]
    for _ in range(2):
        run = pytester.runpytest_subprocess(f"--alluredir={alluredir}", "-p", "no:cacheprovider")
        run.assert_outcomes(passed=2)
        assert "raychaos: WARNING" not in run.stdout.str() + run.stderr.str()
        categories = json.loads((alluredir / "categories.json").read_text())
        assert categories == [TEAM_CATEGORIES[0], *ours]
        text = (alluredir / "environment.properties").read_text()
        assert text.startswith("# the team's\nteam.stage = staging\nteam.url=http\\://x\n")
        env = parse_properties(text)
        assert env["team.stage"] == "staging"
        assert env["team.url"] == "http://x"
        assert env["ray.version"] == "2.60.0 (from default)"
        assert env["ray.versions.tested"] == "2.60.0"
        assert text.count("ray.version=") == 1
        assert (alluredir / "executor.json").read_bytes() == before["executor.json"]
        assert (alluredir / "earlier-result.json").read_bytes() == before["earlier-result.json"]
    results = _results(alluredir)
    # A raychaos test's title carries its claim ids; the team's test keeps its name.
    assert {"name": "claim", "value": "GCS-01"} in results["[GCS-01] test_ours"]["labels"]
    assert "parameters" not in results["test_theirs"]


@pytest.mark.parametrize(("suite", "warned"), [(RAYCHAOS_SUITE, True), (PLAIN_SUITE, False)])
def test_clean_alluredir_under_xdist_is_warned_about_in_raychaos_runs(
    pytester: pytest.Pytester, suite: str, warned: bool
) -> None:
    pytester.makepyfile(test_suite=suite.replace("os._exit(1)", "pass"))
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-n", "1", "--clean-alluredir"
    )
    assert run.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    line = "raychaos: WARNING: --clean-alluredir under -n cleans in every xdist worker*"
    if warned:
        run.stdout.fnmatch_lines([line])
    else:
        run.stdout.no_fnmatch_line(line)
        assert not (alluredir / "categories.json").exists()
