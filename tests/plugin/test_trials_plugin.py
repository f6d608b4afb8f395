"""``--raychaos-trials N`` as users meet it: ids, one Allure history per test, the error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.report.model import load_results

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
import pytest


def test_cluster_test(raychaos_ray_version, raychaos_trial):
    assert 1 <= raychaos_trial <= 3


def test_plain():
    pass
"""


def _ids(result: pytest.RunResult) -> list[str]:
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_every_release_runs_n_times_with_the_trial_in_the_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess(
        "--raychaos-trials=3",
        "--raychaos-ray-version=2.59.0",
        "--raychaos-ray-version=2.60.0",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    )
    assert _ids(result) == sorted(
        [f"test_cluster_test[{v}-trial{n}]" for v in ("2.59.0", "2.60.0") for n in (1, 2, 3)]
        + ["test_plain"]
    ), "a test without a cluster is not repeated"


def test_one_trial_changes_no_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert _ids(result) == ["test_cluster_test[2.60.0]", "test_plain"]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_trials_from_env_and_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(SUITE)
    pytester.makeini("[pytest]\nraychaos_trials = 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    monkeypatch.setenv("RAYCHAOS_TRIALS", "3")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


@pytest.mark.parametrize(
    ("args", "env", "ini", "source", "got"),
    [
        (["--raychaos-trials=0"], None, None, "--raychaos-trials", "'0'"),
        (["--raychaos-trials", "three"], None, None, "--raychaos-trials", "'three'"),
        ([], "2.5", None, "env RAYCHAOS_TRIALS", "'2.5'"),
        ([], None, "-1", "ini raychaos_trials", "'-1'"),
    ],
)
def test_a_bad_trial_count_is_one_error_line_before_any_cluster(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: str | None,
    ini: str | None,
    source: str,
    got: str,
) -> None:
    # No engine at all: a usage error must come before anything talks to Docker.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    if env is not None:
        monkeypatch.setenv("RAYCHAOS_TRIALS", env)
    if ini is not None:
        pytester.makeini(f"[pytest]\nraychaos_trials = {ini}\n")
    pytester.makepyfile("def test_boots(ray_cluster):\n    pass\n")
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [
        f"ERROR: --raychaos-trials (from {source}): expected a whole number of trials ≥ 1, "
        f"got {got}"
    ], errors
    assert not [line for line in result.outlines if "docker" in line.lower()]


ALLURE_SUITE = """
import pytest


@pytest.fixture
def boot(request):
    if request.node.callspec.params["raychaos_trial"] == 2:
        raise RuntimeError("the cluster did not boot")


@pytest.mark.claim("TASK-01")
def test_claim(raychaos_ray_version, raychaos_trial, boot):
    assert raychaos_trial != 3, "trial 3 fails"
"""

CONFTEST = """
import json
from chaos.plugin.results.crash import item_facts


def pytest_collection_finish(session):
    facts = {item.name: item_facts(item, "2.60.0", "local") for item in session.items}
    (session.config.rootpath / "facts.json").write_text(json.dumps(facts))
"""


def _results(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*-result.json"))]


def test_trials_share_one_allure_history_and_the_report_sees_them_together(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(ALLURE_SUITE)
    pytester.makeconftest(CONFTEST)
    alluredir = pytester.path / "allure"
    result = pytester.runpytest_subprocess(
        "--raychaos-trials=3", f"--alluredir={alluredir}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    runs = _results(alluredir)
    # The Allure title may carry more (the claims first); the test id ends it.
    tests = {r["uuid"]: r["name"].rsplit(" ", 1)[-1] for r in runs}
    assert sorted(tests.values()) == [f"test_claim[2.60.0-trial{n}]" for n in (1, 2, 3)]
    assert len({r["historyId"] for r in runs}) == 1, "trials share one history"
    assert len({r["testCaseId"] for r in runs}) == 1
    for run in runs:
        trial = [p for p in run["parameters"] if p["name"] == "raychaos_trial"]
        assert len(trial) == 1, run["parameters"]
        assert trial[0].get("excluded") is True, "the trial is not part of the history"
        assert f"trial{trial[0]['value']}" in run["name"]
    # The set-up failure (no cluster) joined the history too.
    assert {r["status"] for r in runs} == {"passed", "broken", "failed"}
    # What a crashed worker's result would carry is the same identity.
    facts = json.loads((pytester.path / "facts.json").read_text())
    for run in runs:
        assert facts[tests[run["uuid"]]]["historyId"] == run["historyId"]
        assert facts[tests[run["uuid"]]]["testCaseId"] == run["testCaseId"]
    loaded = load_results(alluredir)
    assert len(loaded.tests) == 1, "folded into one test"
    assert len(loaded.runs) == 3, "with its three trials"
