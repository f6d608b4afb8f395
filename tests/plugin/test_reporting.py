"""Allure output under xdist, crash results, run-level files and `raychaos report` (no Docker).

What a repository that is not raychaos' own sees is in test_report_guest.py; that crash
results carry allure-pytest's identity of the test, in test_report_identity.py.

The suites below are plain tests with ``claim`` markers: they exercise the reporting hooks
without booting a cluster, so the whole module runs in seconds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chaos.cli import main
from chaos.plugin.results.item_labels import claim_story
from chaos.report.catalogue import load_catalogue
from chaos.report.categories import CATEGORIES, categorize
from chaos.report.claims import FINDING_LABEL, SCHEMA, SCHEMA_LABEL
from chaos.report.coverage import coverage, render_text, verdict_for, verdict_of
from chaos.report.matrix import worst
from chaos.report.model import Results, TestResult, fold_retries
from chaos.report.properties import format_properties, parse_properties

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = '''
import base64, os, signal
import allure, pytest
from chaos.errors import DockerOperationError, FaultNotObserved

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def evidence(tmp_path):
    """Attaches in teardown, as the experiment fixture does."""
    yield
    picture = tmp_path / "timeline.png"
    picture.write_bytes(PNG)
    allure.attach.file(str(picture), name="timeline", attachment_type=allure.attachment_type.PNG)
    allure.attach(
        '{"kill → DEAD (s)": 6.2}', name="measurements", attachment_type=allure.attachment_type.JSON
    )


@pytest.fixture
def in_a_worker(request):
    if not hasattr(request.config, "workerinput"):
        pytest.skip("kills its process: only under xdist")


@pytest.fixture
def dies_in_setup(in_a_worker):
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.claim("TASK-01")
def test_retried(evidence):
    """A killed worker's task is retried."""
    with allure.step("kill the worker"):
        allure.attach("pid 42", name="victim")


@pytest.mark.claim("TASK-02")
@pytest.mark.parametrize("k", [1, 2])
def test_budget(k):
    """The env budget applies."""


@pytest.mark.claim("NET-01")
@pytest.mark.xfail(
    strict=True, raises=AssertionError, reason="FINDING: not retried under a partition"
)
def test_finding():
    raise AssertionError("still waiting")


@pytest.mark.claim("OBJ-01")
def test_contradiction():
    assert False, "ObjectLostError expected, the value came back"


@pytest.mark.claim("NODE-02")
def test_timing():
    raise AssertionError("node DEAD after 31.0 s, outside [3.0, 9.0]")


@pytest.mark.claim("GCS-02")
def test_harness():
    raise DockerOperationError("container create failed: no space left on device")


@pytest.mark.claim("GCS-03")
def test_inconclusive():
    raise FaultNotObserved("the raylet PID is still there")


@pytest.mark.claim("GCS-01", "NODE-01")
def test_crash_in_call(in_a_worker):
    """The head survives a worker crash."""
    os._exit(1)


@pytest.mark.claim("ACTOR-01")
def test_crash_in_setup(dies_in_setup):
    """An actor restarts."""
'''

NAMES = {
    "test_retried",
    "test_budget[1]",
    "test_budget[2]",
    "test_finding",
    "test_contradiction",
    "test_timing",
    "test_harness",
    "test_inconclusive",
    "test_crash_in_call",
    "test_crash_in_setup",
}
CRASHED = {"test_crash_in_call", "test_crash_in_setup"}


@pytest.fixture(autouse=True)
def _no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermetic and fast: no sweep, no Docker queries (Docker lines then read "unavailable")."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    # When these tests run under xdist themselves, the inner runs must not think so too.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    # The executor is this machine's run, also when these tests run in a CI job.
    for name in ("CI", "GITHUB_RUN_ID", "GITLAB_CI", "CI_JOB_URL", "JENKINS_URL", "BUILD_URL"):
        monkeypatch.delenv(name, raising=False)


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, Path]:
    pytester.makepyfile(test_suite=SUITE)
    alluredir = pytester.path / "allure-results"
    result = pytester.runpytest_subprocess(
        f"--alluredir={alluredir}", "-p", "no:cacheprovider", *args
    )
    return result, alluredir


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    """Results by test name (a raychaos title is the name with the claim ids in front)."""
    found: dict[str, dict[str, Any]] = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        claims = ", ".join(_labels(data, "claim"))
        prefix = f"[{claims}] " if claims else ""
        name = data["name"].removeprefix(prefix)
        assert name not in found, f"two results for {name}"
        found[name] = data
    return found


def _labels(result: dict[str, Any], name: str) -> list[str]:
    return [x["value"] for x in result["labels"] if x["name"] == name]


def _first_category(categories: list[dict[str, Any]], result: dict[str, Any]) -> str | None:
    message = (result.get("statusDetails") or {}).get("message", "")
    for category in categories:
        if result["status"] in category["matchedStatuses"] and re.fullmatch(
            category["messageRegex"], message
        ):
            return str(category["name"])
    return None


@pytest.fixture
def xdist_run(pytester: pytest.Pytester) -> tuple[pytest.RunResult, Path]:
    """The suite under -n 2, two of its tests killing their worker (in call and in set-up)."""
    return _run(pytester, "-n", "2")


def test_xdist_results_crash_safe_labelled_and_categorised(
    xdist_run: tuple[pytest.RunResult, Path],
) -> None:
    """One xdist run checked four ways (each run costs seconds on a busy machine)."""
    _check_one_result_per_test(*xdist_run)
    _check_labels_steps_and_attachments(xdist_run[1])
    _check_categories(xdist_run[1])


def test_xdist_run_level_files_and_report(
    xdist_run: tuple[pytest.RunResult, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_run_level_files(xdist_run[1])
    _check_report(xdist_run[1], tmp_path, capsys)


def _check_one_result_per_test(run: pytest.RunResult, alluredir: Path) -> None:
    run.stdout.fnmatch_lines(["*worker 'gw*' crashed while running*test_crash_in_call*"])
    run.assert_outcomes(passed=3, failed=6, xfailed=1)
    results = _results(alluredir)
    assert set(results) == NAMES
    for name in CRASHED:
        crashed = results[name]
        assert crashed["status"] == "broken"
        assert re.match(
            r"worker 'gw\d+' crashed while running", crashed["statusDetails"]["message"]
        )
        assert _labels(crashed, "epic") == ["Ray fault tolerance"]
        assert _labels(crashed, "thread")[0].startswith("gw")
        assert crashed["parameters"][-1]["name"] == "raychaos.ray_version"
    call = results["test_crash_in_call"]
    assert call["name"] == "[GCS-01, NODE-01] test_crash_in_call"  # as set-up would title it
    assert _labels(call, "claim") == ["GCS-01", "NODE-01"]
    assert _labels(call, "feature") == ["Head and GCS", "Nodes and raylets"]
    assert _labels(call, "severity") == ["blocker"]
    assert _labels(call, "story") == [claim_story("GCS-01"), claim_story("NODE-01")]
    assert _labels(call, "tag") == ["GCS-01", "NODE-01"]
    assert _labels(results["test_crash_in_setup"], "claim") == ["ACTOR-01"]


def _check_labels_steps_and_attachments(alluredir: Path) -> None:
    retried = _results(alluredir)["test_retried"]
    assert retried["name"] == "[TASK-01] test_retried"
    assert _labels(retried, "claim") == ["TASK-01"]
    assert _labels(retried, "feature") == ["Tasks"]
    assert _labels(retried, "story") == [claim_story("TASK-01")]
    assert _labels(retried, "tag") == ["TASK-01"]
    assert [link["url"] for link in retried["links"]] == [
        "https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html"
    ]
    assert {"name": "raychaos.ray_version", "value": "'2.60.0'", "excluded": True} in retried[
        "parameters"
    ]
    [step] = retried["steps"]
    assert step["name"] == "kill the worker"
    # Every attachment any result or container names exists (teardown ones live in containers).
    sources = [a["source"] for a in step["attachments"]]
    containers = [json.loads(p.read_text()) for p in alluredir.glob("*-container.json")]
    teardown = [
        a
        for c in containers
        if retried["uuid"] in c.get("children", [])
        for f in c.get("afters", [])
        for a in f.get("attachments", [])
    ]
    assert {a["name"] for a in teardown} == {"timeline", "measurements"}
    sources += [a["source"] for a in teardown]
    for source in sources:
        assert (alluredir / source).is_file(), source


def _check_categories(alluredir: Path) -> None:
    """Contradictions, timing, harness errors, inconclusive runs and crashes are told apart."""
    categories = json.loads((alluredir / "categories.json").read_text())
    assert [c["name"] for c in categories] == [c.name for c in CATEGORIES]
    results = _results(alluredir)
    seen = {name: _first_category(categories, r) for name, r in results.items()}
    assert seen == {
        "test_retried": None,
        "test_budget[1]": None,
        "test_budget[2]": None,
        "test_finding": "Finding: Ray differs from its docs",
        "test_contradiction": "Ray behaviour contradicts its docs",
        "test_timing": "Timing outside the documented window",
        "test_harness": "Harness or Docker error",
        "test_inconclusive": "Fault not observed / inconclusive",
        "test_crash_in_call": "Worker crashed (xdist)",
        "test_crash_in_setup": "Worker crashed (xdist)",
    }
    # The HTML page classifies as Allure does.
    for name, result in results.items():
        message = (result.get("statusDetails") or {}).get("message", "")
        assert categorize(result["status"], message) == seen[name]


def _check_run_level_files(alluredir: Path) -> None:
    env = parse_properties((alluredir / "environment.properties").read_text())
    assert env["ray.version"] == "2.60.0 (from default)"
    assert env["ray.versions.tested"] == "2.60.0"
    assert env["image"] == "raychaos/ray:2.60.0-py3.11"
    assert env["xdist.workers"] == "2"
    assert int(env["runner.cpus"]) >= 1
    assert env["runner.memory"].endswith("GiB")
    assert env["docker.server"]  # a version, or "unavailable: …" without a daemon
    executor = json.loads((alluredir / "executor.json").read_text())
    assert executor["name"] == "raychaos"
    assert executor["buildName"] == f"raychaos run {env['raychaos.run']}"


def _check_report(alluredir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`raychaos report`: every claim id, each status, measurements, an inlined timeline."""
    out = tmp_path / "reports" / "summary.html"
    assert main(["report", str(alluredir), "-o", str(out)]) == 1  # failed and broken results
    assert "raychaos: report" in capsys.readouterr().out
    page = out.read_text()
    claims = load_catalogue().ids
    assert len(claims) == len(set(claims)) > 80  # the whole catalogue, each id once
    for claim in claims:
        assert f"<tr><th>{claim}</th>" in page, claim

    def cell(claim: str) -> str:
        found = re.search(rf'<tr><th>{claim}</th><td>[^<]*</td><td class="s ([a-z]+)"', page)
        assert found, claim
        return found.group(1)

    assert cell("TASK-01") == "passed"
    assert cell("TASK-02") == "passed"
    assert cell("NET-01") == "finding"
    assert cell("OBJ-01") == "failed"
    assert cell("GCS-02") == "broken"
    assert cell("GCS-01") == "broken"
    assert cell("TASK-03") == "notrun"
    assert "passed (2/2)" in page
    assert "FINDING: not retried under a partition" in page
    assert "ObjectLostError expected, the value came back" in page
    assert "Worker crashed (xdist)" in page
    assert "kill → DEAD (s)" in page and "6.2" in page
    assert page.count('src="data:image/png;base64,') == 1
    assert "<script" not in page


def test_an_earlier_run_is_kept_and_run_files_name_this_run(pytester: pytest.Pytester) -> None:
    """raychaos cleans nothing (--clean-alluredir is the user's); run files describe this run."""
    alluredir = pytester.path / "allure-results"
    (alluredir / "history").mkdir(parents=True)
    (alluredir / "history" / "history.json").write_text("{}")
    earlier = {
        "uuid": "old",
        "name": "test_earlier",
        "status": "passed",
        "start": 1000,
        "stop": 2000,
        "labels": [{"name": "claim", "value": "TASK-01"}],
        "parameters": [{"name": "raychaos.ray_version", "value": "'2.1.0'", "excluded": True}],
    }
    (alluredir / "old-result.json").write_text(json.dumps(earlier))
    (alluredir / "old-attachment.png").write_text("an earlier run's")
    if shutil.which("git"):
        git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q"], cwd=pytester.path, check=True)
        subprocess.run(
            [*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=pytester.path, check=True
        )
    run, _ = _run(pytester)
    run.assert_outcomes(passed=3, failed=4, xfailed=1, skipped=2)
    assert (alluredir / "history" / "history.json").read_text() == "{}"
    assert (alluredir / "old-attachment.png").read_text() == "an earlier run's"
    assert json.loads((alluredir / "old-result.json").read_text()) == earlier
    results = _results(alluredir)
    assert set(results) == NAMES | {"test_earlier"}
    # Skipped in set-up (no xdist here) and still labelled: set-up labelling covers skips.
    assert _labels(results["test_crash_in_setup"], "claim") == ["ACTOR-01"]
    env = parse_properties((alluredir / "environment.properties").read_text())
    assert env["xdist.workers"] == "0 (no xdist)"
    # The earlier run's 2.1.0 is not this run's.
    assert env["ray.versions.tested"] == "2.60.0"
    if shutil.which("git"):
        assert re.fullmatch(r"[0-9a-f]{40}( \(uncommitted changes\))?", env["git.commit"])


def test_report_of_a_missing_directory_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")]) == 2
    assert "run pytest with --alluredir" in capsys.readouterr().err


# -- pure functions ----------------------------------------------------------------------------
def _result(
    status: str,
    message: str = "",
    stop: int = 0,
    history: str = "h",
    labels: tuple[tuple[str, str], ...] = (),
) -> TestResult:
    return TestResult(
        uuid=f"u{stop}",
        name="t",
        full_name="m#t",
        history_id=history,
        status=status,
        message=message,
        trace="",
        start=0,
        stop=stop,
        claims=("TASK-01",),
        ray_version="2.60.0",
        labels=labels,
    )


def test_finding_is_a_labelled_result_and_an_unlabelled_xfail_finding_is_listed_uncounted() -> None:
    """A result is a finding by its ``raychaos.finding`` label alone. One whose message reads
    like a finding without it (an older raychaos, a non-strict or imperative xfail) is a skip,
    and coverage lists it as not counted. A bare "FINDING:" is not one either."""
    older = _result("skipped", "XFAIL FINDING: x\n\nAssertionError")
    assert older.effective_status == "skipped" and older.unlabelled_finding
    assert verdict_of(older) == "skipped" and verdict_for("TASK-01", older) == "skipped"
    assert _result("skipped", "XFAIL flaky on CI").effective_status == "skipped"
    assert not _result("skipped", "XFAIL flaky on CI").unlabelled_finding
    assert _result("skipped", "FINDING: x").effective_status == "skipped"
    assert _result("skipped", "Skipped: FINDING: x").effective_status == "skipped"
    schema = (SCHEMA_LABEL, SCHEMA)
    unlabelled = _result("skipped", "XFAIL FINDING: x\n\nAssertionError", labels=(schema,))
    assert unlabelled.effective_status == "skipped" and unlabelled.unlabelled_finding
    labelled = (schema, (FINDING_LABEL, "AssertionError"))
    found = _result("skipped", "XFAIL FINDING: x", labels=labelled)
    assert found.effective_status == "finding" and not found.unlabelled_finding
    results = Results(Path("r"), [older], {}, {}, {}, [])
    cov = coverage(results, load_catalogue(), ["TASK-01"])
    assert cov.cell("TASK-01", "2.60.0").verdict == "skipped"
    assert {bucket: n for bucket, n in cov.counts("2.60.0").items() if n} == {"skipped": 1}
    (line,) = cov.uncounted
    assert line.startswith("m#t [2.60.0] (TASK-01): its message says 'XFAIL FINDING:'")
    assert "no raychaos.finding label" in line and line.endswith("counted as skipped")
    text = render_text(cov, strict=False)
    assert f"not counted as findings (1):\n  {line}" in text
    assert not coverage(Results(Path("r"), [found], {}, {}, {}, []), load_catalogue()).uncounted
    # A harness error the fixtures turned into pytest.fail is not a contradiction of the docs.
    assert (
        _result("failed", "Failed: ClusterBootTimeout: 1 of 3 ALIVE").effective_status == "broken"
    )
    assert _result("failed", "AssertionError: lost").effective_status == "failed"


def test_retries_fold_to_the_latest_and_cells_show_the_worst() -> None:
    folded = fold_retries([_result("broken", stop=1), _result("passed", stop=2)])
    assert [o.status for o in folded] == ["passed"]
    assert worst(["passed", "finding", "broken"]) == "broken"
    assert worst(["passed", "failed", "broken"]) == "failed"
    assert worst([]) == "not run"


def test_properties_round_trip_with_colons_in_keys() -> None:
    props = {"image.raychaos/ray:2.60.0-py3.11": "sha256:abc (built here)", "a b": "x\ny"}
    assert parse_properties(format_properties(props)) == {
        "image.raychaos/ray:2.60.0-py3.11": "sha256:abc (built here)",
        "a b": "x y",
    }


@pytest.mark.parametrize(
    ("status", "message", "category"),
    [
        ("failed", "Failed: ClusterBootTimeout: 2 of 3 nodes ALIVE", "Harness or Docker error"),
        ("broken", "docker.errors.APIError: 500 Server Error", "Harness or Docker error"),
        (
            "failed",
            "AssertionError: window 2.0 s not within the band",
            "Timing outside the documented window",
        ),
        ("broken", "KeyError: 'node_id'", "Unexpected exception (harness bug)"),
        (
            "failed",
            "chaos.errors.FaultNotObserved: still running",
            "Fault not observed / inconclusive",
        ),
        ("passed", "", None),
    ],
)
def test_categories(status: str, message: str, category: str | None) -> None:
    assert categorize(status, message) == category
