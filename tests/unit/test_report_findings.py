"""Findings, fixed findings and failures told apart the same way in Allure and `raychaos report`;
executor.json from CI variables; whole stories and claim-prefixed titles.

The result shapes below are what allure-pytest 2.16 writes for a real run (checked against
``pytest --alluredir`` on a strict xfail that fails, one that passes, and a plain failure).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from chaos.cli import main
from chaos.plugin.results.item_labels import claim_story, story_of
from chaos.plugin.results.runfiles import RunInfo, executor, ours, write_run_files
from chaos.report.catalogue import load_catalogue
from chaos.report.categories import (
    CATEGORIES,
    FINDING,
    FINDING_GONE,
    INCONCLUSIVE,
    INTERMITTENT,
    INTERMITTENT_PREFIX,
    categorize,
)
from chaos.report.claims import (
    FINDING_LABEL,
    INCONCLUSIVE_LABEL,
    SCHEMA,
    SCHEMA_LABEL,
    claim_title,
    untitled,
)
from chaos.report.html import render_html
from chaos.report.matrix import claim_matrix, worst
from chaos.report.model import GONE, load_results, result_from_json

#: allure-pytest: an xfail (strict) whose test raised as the marker expects, with the labels
#: raychaos gives every result (the schema) and a recorded finding (its exception class).
FINDING_SHAPE = {
    "status": "skipped",
    "labels": [
        {"name": SCHEMA_LABEL, "value": SCHEMA},
        {"name": FINDING_LABEL, "value": "AssertionError"},
    ],
    "statusDetails": {
        "message": "XFAIL FINDING: not retried within 60 s\n\nAssertionError: still waiting",
        "trace": "def test_finding():\n>   raise AssertionError('still waiting')",
    },
}
#: allure-pytest alone: a strict xfail whose test passed is "failed" with no details at all.
BARE_XPASS_SHAPE: dict[str, Any] = {"status": "failed"}
#: The same result once raychaos' hook gave it pytest's line as its message.
XPASS_SHAPE = {
    "status": "failed",
    "statusDetails": {"message": "[XPASS(strict)] FINDING: not retried within 60 s"},
}
FAILED_SHAPE = {
    "status": "failed",
    "statusDetails": {"message": "AssertionError: ObjectLostError expected, got the value"},
}


def _result(shape: dict[str, Any], name: str = "test_x", claim: str = "NET-01") -> dict[str, Any]:
    """A result of ``shape``; its ``labels``, if any, are added to the claim's."""
    extra = {k: v for k, v in shape.items() if k != "labels"}
    return {
        "uuid": f"u-{name}",
        "name": f"[{claim}] {name}",
        "fullName": f"experiments.test_x#{name}",
        "historyId": f"h-{name}",
        "start": 1,
        "stop": 2,
        "labels": [{"name": "claim", "value": claim}, *shape.get("labels", [])],
        "parameters": [{"name": "raychaos.ray_version", "value": "'2.60.0'", "excluded": True}],
        **extra,
    }


def _allure_category(data: dict[str, Any]) -> str | None:
    """What Allure itself picks from categories.json: the first whose regex matches the
    whole message (Java ``matches``) and whose statuses hold the result's."""
    message = (data.get("statusDetails") or {}).get("message") or ""
    for category in (c.to_allure() for c in CATEGORIES):
        if data["status"] in category["matchedStatuses"] and re.fullmatch(
            category["messageRegex"], message
        ):
            return str(category["name"])
    return None


# -- categories ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "category", "effective"),
    [
        (FINDING_SHAPE, FINDING, "finding"),
        (XPASS_SHAPE, FINDING_GONE, GONE),
        (BARE_XPASS_SHAPE, FINDING_GONE, GONE),
        (FAILED_SHAPE, "Ray behaviour contradicts its docs", "failed"),
    ],
)
def test_findings_and_fixed_findings_are_categorised_apart_from_failures(
    shape: dict[str, Any], category: str, effective: str
) -> None:
    data = _result(shape)
    loaded = result_from_json(data)
    assert loaded.category == category
    assert loaded.effective_status == effective
    if shape is not BARE_XPASS_SHAPE:  # Allure needs a message; raychaos' hook gives it one
        assert _allure_category(data) == category


def test_finding_categories_come_before_those_a_finding_reason_could_match() -> None:
    """A FINDING reason may say "not within" or name a harness error class; it is a finding.
    Only the inconclusive category comes first: its message starts "INCONCLUSIVE:", which no
    xfail's ("XFAIL …") or strict XPASS's ("[XPASS(strict)] …") message does."""
    names = [c.name for c in CATEGORIES]
    assert names[:4] == [INCONCLUSIVE, INTERMITTENT, FINDING, FINDING_GONE]
    assert categorize("skipped", "XFAIL FINDING: INCONCLUSIVE: x") == FINDING
    assert categorize("skipped", "XFAIL FINDING: WorkloadTimeout: not within 30 s") == FINDING
    intermittent = f"{INTERMITTENT_PREFIX} (RaceLost): WorkloadTimeout: not within 30 s"
    assert categorize("skipped", intermittent) == INTERMITTENT
    assert (
        categorize("failed", "[XPASS(strict)] FINDING: not within 60 s (WorkloadTimeout)")
        == FINDING_GONE
    )
    assert categorize("skipped", "XFAIL flaky on CI") is None
    assert categorize("failed", "[XPASS(strict)] flaky") is None  # not a recorded finding


def test_an_inconclusive_run_is_its_own_cell_on_the_page_never_not_run(tmp_path: Path) -> None:
    """A result the host was too busy to judge (its raychaos.inconclusive label) is shown as
    inconclusive in the matrix: worse than a pass, better than a skip, never "not run"."""
    inconclusive = {
        "status": "broken",
        "labels": [{"name": INCONCLUSIVE_LABEL, "value": "worker-1 stalled 3.1 of 5 s"}],
        "statusDetails": {"message": "INCONCLUSIVE: worker-1 waited for a CPU 3.1 s of 5 s"},
    }
    data = _result(inconclusive, "test_busy", "NODE-01")
    loaded = result_from_json(data)
    assert loaded.effective_status == "inconclusive"
    cells = claim_matrix([loaded], ["NODE-01"], ["2.60.0"])
    assert cells[("NODE-01", "2.60.0")].status == "inconclusive"
    assert worst(["passed", "inconclusive"]) == "inconclusive"
    assert worst(["inconclusive", "skipped"]) == "skipped"
    (tmp_path / f"{data['uuid']}-result.json").write_text(json.dumps(data))
    page = render_html(load_results(tmp_path), [("NODE-01", "kill")])
    assert '<td class="s inconclusive"' in page


def test_a_fixed_finding_is_never_a_failure_on_the_page_or_in_the_matrix(tmp_path: Path) -> None:
    tests = [
        result_from_json(_result(XPASS_SHAPE, "test_gone", "NET-01")),
        result_from_json(_result(FINDING_SHAPE, "test_finding", "PEND-05")),
    ]
    cells = claim_matrix(tests, ["NET-01", "PEND-05"], ["2.60.0"])
    assert cells[("NET-01", "2.60.0")].status == GONE
    assert cells[("PEND-05", "2.60.0")].status == "finding"
    assert worst(["passed", GONE]) == GONE and worst([GONE, "failed"]) == "failed"
    for data in (_result(XPASS_SHAPE, "test_gone"), _result(FINDING_SHAPE, "test_finding")):
        (tmp_path / f"{data['uuid']}-result.json").write_text(json.dumps(data))
    page = render_html(load_results(tmp_path), [("NET-01", "partition"), ("PEND-05", "x")])
    failures = page.split("<h2>Failures and broken experiments</h2>", 1)[1].split("<h2>", 1)[0]
    assert "None." in failures
    gone = page.split("<h2>Findings no longer reproduced</h2>", 1)[1].split("<h2>", 1)[0]
    assert "[NET-01] test_gone" in gone and FINDING_GONE in gone
    assert '<td class="s gone"' in page


# -- raychaos report's exit code ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("shapes", "code"),
    [
        ([FINDING_SHAPE, {"status": "passed"}, {"status": "skipped"}], 0),
        ([FINDING_SHAPE, FAILED_SHAPE], 1),
        ([{"status": "broken", "statusDetails": {"message": "KeyError: 'x'"}}], 1),
        ([{"status": "passed"}, XPASS_SHAPE], 1),
        ([{"status": "passed"}, BARE_XPASS_SHAPE], 1),
    ],
)
def test_report_exits_1_on_failed_broken_or_fixed_findings(
    tmp_path: Path, shapes: list[dict[str, Any]], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for index, shape in enumerate(shapes):
        data = _result(shape, f"test_{index}")
        (results / f"{data['uuid']}-result.json").write_text(json.dumps(data))
    assert main(["report", str(results), "-o", str(tmp_path / "r.html")]) == code
    assert "raychaos: report" in capsys.readouterr().out


def test_report_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit 0 when no result is failed or broken" in text
    assert "1 when any result is failed or broken, or a recorded finding no longer" in text
    assert "2 on a usage error" in text


# -- executor.json ------------------------------------------------------------------------------
GITHUB = {
    "CI": "true",
    "GITHUB_ACTIONS": "true",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "team/platform",
    "GITHUB_RUN_ID": "9876543210",
    "GITHUB_RUN_NUMBER": "412",
    "GITHUB_RUN_ATTEMPT": "2",
    "GITHUB_WORKFLOW": "nightly",
    "GITHUB_JOB": "chaos",
}
GITLAB = {
    "CI": "true",
    "GITLAB_CI": "true",
    "CI_PROJECT_PATH": "team/platform",
    "CI_PROJECT_URL": "https://gitlab.example.com/team/platform",
    "CI_PIPELINE_ID": "5551",
    "CI_PIPELINE_IID": "77",
    "CI_PIPELINE_URL": "https://gitlab.example.com/team/platform/-/pipelines/5551",
    "CI_JOB_NAME": "chaos",
    "CI_JOB_URL": "https://gitlab.example.com/team/platform/-/jobs/123",
}
JENKINS = {
    "JENKINS_URL": "https://ci.example.com/",
    "JOB_NAME": "ray-chaos",
    "JOB_URL": "https://ci.example.com/job/ray-chaos/",
    "BUILD_NUMBER": "31",
    "BUILD_URL": "https://ci.example.com/job/ray-chaos/31/",
}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            GITHUB,
            {
                "name": "raychaos (GitHub Actions)",
                "type": "github",
                "url": "https://github.com/team/platform",
                "buildOrder": 412,
                "buildName": "nightly #412 chaos (attempt 2) (raychaos run r1)",
                "buildUrl": "https://github.com/team/platform/actions/runs/9876543210/attempts/2",
            },
        ),
        (
            GITLAB,
            {
                "name": "raychaos (GitLab CI)",
                "type": "gitlab",
                "url": "https://gitlab.example.com/team/platform",
                "buildOrder": 77,
                "buildName": "team/platform pipeline #77 chaos (raychaos run r1)",
                "buildUrl": "https://gitlab.example.com/team/platform/-/jobs/123",
            },
        ),
        (
            JENKINS,
            {
                "name": "raychaos (Jenkins)",
                "type": "jenkins",
                "url": "https://ci.example.com/job/ray-chaos/",
                "buildOrder": 31,
                "buildName": "ray-chaos #31 (raychaos run r1)",
                "buildUrl": "https://ci.example.com/job/ray-chaos/31/",
            },
        ),
        (
            {"CI": "true", "BUILD_NUMBER": "8", "BUILD_URL": "https://ci.example.org/8"},
            {
                "name": "raychaos (CI)",
                "type": "ci",
                "buildOrder": 8,
                "buildName": "CI build #8 (raychaos run r1)",
                "buildUrl": "https://ci.example.org/8",
            },
        ),
        ({}, {"name": "raychaos", "type": "pytest", "buildName": "raychaos run r1"}),
    ],
)
def test_executor_from_ci_variables(env: dict[str, str], expected: dict[str, Any]) -> None:
    data = executor("r1", "2.60.0", env)
    assert data == {**expected, "reportName": "Ray 2.60.0 fault tolerance (raychaos)"}
    assert ours(data)


def test_executor_written_from_ci_replaces_only_raychaos_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name, value in GITHUB.items():
        monkeypatch.setenv(name, value)
    info = RunInfo("r1", "2.60.0", "default", "raychaos/ray:2.60.0-py3.11", 0, tmp_path)
    write_run_files(tmp_path, info, {"2.60.0"})
    written = json.loads((tmp_path / "executor.json").read_text())
    assert written["type"] == "github" and written["buildOrder"] == 412
    # An earlier raychaos run's file (local) is replaced; a team's own is never touched.
    (tmp_path / "executor.json").write_text('{"name": "raychaos", "buildName": "old"}')
    write_run_files(tmp_path, info, {"2.60.0"})
    assert json.loads((tmp_path / "executor.json").read_text())["type"] == "github"
    theirs = '{"name": "GitHub Actions", "type": "github", "buildName": "theirs"}'
    (tmp_path / "executor.json").write_text(theirs)
    write_run_files(tmp_path, info, {"2.60.0"})
    assert (tmp_path / "executor.json").read_text() == theirs
    assert not ours(json.loads(theirs)) and not ours({"name": "raychaosx"}) and not ours([])


# -- stories and titles -------------------------------------------------------------------------
def test_every_claim_story_is_the_catalogue_text_whole() -> None:
    for claim in load_catalogue():
        story = claim_story(claim.id)
        assert story == f"{claim.id}: {claim.fault} → {claim.outcome}"
        assert "…" not in story
    assert claim_story("XYZ-99") is None


def _wrapped() -> None:
    """A worker's task is retried on another node
    once the node is declared dead.

    Details that are not the story."""


def test_a_docstring_story_is_its_whole_first_paragraph() -> None:
    item = cast(pytest.Item, SimpleNamespace(obj=_wrapped, name="test_x"))
    expected = "A worker's task is retried on another node once the node is declared dead."
    assert story_of(item) == expected


def test_titles_carry_the_claim_ids_in_front() -> None:
    assert claim_title(["NODE-01"], "test_x[2.60.0]") == "[NODE-01] test_x[2.60.0]"
    assert claim_title(["NODE-01", "NODE-02"], "test_x") == "[NODE-01, NODE-02] test_x"
    assert claim_title(["NODE-01"], "[NODE-01] test_x") == "[NODE-01] test_x"
    assert claim_title([], "test_x") == "test_x"
    for claims in (["NODE-01"], ["NODE-01", "OBJ-12"], []):
        assert untitled(claim_title(claims, "test_x[2.60.0]")) == "test_x[2.60.0]"
    assert untitled("[not a claim] test_x") == "[not a claim] test_x"
