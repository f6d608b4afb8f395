"""chaos.report's pure parts: claim labels, merges of the run-level files, this run's results."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from chaos.backends.docker.facts import engine_properties
from chaos.plugin.results.runfiles import RunInfo, raychaos_versions, write_run_files
from chaos.report.catalogue import SEVERITIES
from chaos.report.categories import CATEGORIES, Category, merge_categories
from chaos.report.claims import claim_labels, claim_links, worst_severity
from chaos.report.properties import format_properties, merge_properties, parse_properties


def test_claim_labels_take_the_worst_severity_and_each_feature_once() -> None:
    claims = ["ADVICE-01", "NODE-01", "NODE-02", "TASK-01"]
    labels = claim_labels(claims, ["A story.", "B story.", "A story."])
    assert labels == [
        ("epic", "Ray fault tolerance"),
        ("feature", "Runbook advice"),
        ("feature", "Nodes and raylets"),
        ("feature", "Tasks"),
        ("severity", "critical"),
        ("story", "A story."),
        ("story", "B story."),
        ("claim", "ADVICE-01"),
        ("claim", "NODE-01"),
        ("claim", "NODE-02"),
        ("claim", "TASK-01"),
        ("tag", "ADVICE-01"),
        ("tag", "NODE-01"),
        ("tag", "NODE-02"),
        ("tag", "TASK-01"),
    ]
    assert ("severity", "blocker") in claim_labels(["TASK-01", "GCS-01"], ["s"])
    assert ("severity", "minor") in claim_labels(["ADVICE-01"], ["s"])
    assert claim_labels([], ["s"]) == []
    assert worst_severity(["trivial", "minor", "normal"]) == "normal"
    assert SEVERITIES[0] == "blocker"


def test_unknown_claim_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown claim id 'XYZ-01'"):
        claim_labels(["XYZ-01"], ["s"])


def test_claim_links_one_per_page() -> None:
    # NET and NODE share the nodes page: allure-pytest keeps only the first link to a URL.
    assert claim_links(["NET-01", "NODE-01", "TASK-01"]) == [
        ("https://docs.ray.io/en/latest/ray-core/fault_tolerance/nodes.html", "Ray docs: Network"),
        ("https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html", "Ray docs: Tasks"),
    ]


def test_merged_categories_keep_theirs_first_and_replace_ours_by_name() -> None:
    ours = (Category("A", "ours", ("failed",), ".*"), Category("B", "ours", ("broken",), ".*"))
    theirs = [
        {"name": "Team", "matchedStatuses": ["failed"]},
        {"name": "B", "messageRegex": "stale"},
        "not a category",
    ]
    merged = merge_categories(theirs, ours)
    assert merged == [theirs[0], "not a category", ours[0].to_allure(), ours[1].to_allure()]
    assert merge_categories(merged, ours) == merged


def test_merged_properties_keep_their_lines_verbatim() -> None:
    theirs = "! a comment\nteam.path = C:\\\\x \\\n    continued\nimage : theirs\nzz=1"
    merged = merge_properties(theirs, {"image": "raychaos/ray:2.60.0", "ray.version": "2.60.0"})
    assert merged == (
        "! a comment\nteam.path = C:\\\\x \\\n    continued\nzz=1\n"
        "image=raychaos/ray:2.60.0\nray.version=2.60.0\n"
    )
    assert parse_properties(merged) == {
        "team.path": "C:\\x continued",
        "zz": "1",
        "image": "raychaos/ray:2.60.0",
        "ray.version": "2.60.0",
    }
    assert merge_properties("", {"a": "1"}) == "a=1\n"


def test_properties_parse_java_forms() -> None:
    text = "a b\nc:d\n e = f \nu=\\u00e9\\n\n# x=y\nlong=one \\\n  two\nlast=1\\\\\nend=2"
    assert parse_properties(text) == {
        "a": "b",
        "c": "d",
        "e": "f ",
        "u": "é\n",
        "long": "one two",
        "last": "1\\",
        "end": "2",
    }
    props = {"k:ey=": "v\\al", "image.x:1": "sha256:1 (built here)"}
    assert parse_properties(format_properties(props)) == props


def _result(directory: Path, name: str, start: int, **extra: object) -> None:
    data = {"uuid": name, "name": name, "status": "passed", "start": start, **extra}
    (directory / f"{name}-result.json").write_text(json.dumps(data))


def test_only_this_runs_raychaos_results_count(tmp_path: Path) -> None:
    since = int(time.time() * 1000)
    ours = {"name": "raychaos.ray_version", "value": "'2.60.0'", "excluded": True}
    _result(tmp_path, "earlier", since - 60_000, parameters=[ours])
    _result(
        tmp_path, "theirs", since + 1, parameters=[{"name": "raychaos.ray_version", "value": "'1'"}]
    )
    assert raychaos_versions(tmp_path, since) is None
    _result(tmp_path, "claimed", since + 2, labels=[{"name": "claim", "value": "TASK-01"}])
    assert raychaos_versions(tmp_path, since) == set()
    _result(tmp_path, "ours", since + 3, parameters=[ours])
    assert raychaos_versions(tmp_path, since) == {"2.60.0"}
    (tmp_path / "broken-result.json").write_text("{not json")
    assert raychaos_versions(tmp_path, since) == {"2.60.0"}


@pytest.fixture
def info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunInfo:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    image = "raychaos/ray:2.60.0-py3.11"
    # What the plugin asks the engine; an engine that does not answer is written, not raised.
    return RunInfo(
        "r1", "2.60.0", "default", image, 0, tmp_path, (), engine_properties(image, (), 0)
    )


def test_run_files_keep_another_executor_and_replace_our_own(tmp_path: Path, info: RunInfo) -> None:
    theirs = '{"name": "Jenkins"}'
    (tmp_path / "executor.json").write_text(theirs)
    assert write_run_files(tmp_path, info, {"2.60.0"}) == []
    assert (tmp_path / "executor.json").read_text() == theirs
    (tmp_path / "executor.json").write_text('{"name": "raychaos", "buildName": "old"}')
    write_run_files(tmp_path, info, {"2.60.0"})
    assert json.loads((tmp_path / "executor.json").read_text())["buildName"] == "raychaos run r1"
    categories = json.loads((tmp_path / "categories.json").read_text())
    assert [c["name"] for c in categories] == [c.name for c in CATEGORIES]
    env = parse_properties((tmp_path / "environment.properties").read_text())
    assert env["raychaos.run"] == "r1"
    assert env["docker.server"].startswith("unavailable")


def test_run_files_leave_what_they_cannot_read(tmp_path: Path, info: RunInfo) -> None:
    (tmp_path / "categories.json").write_text('{"name": "not a list"}')
    (tmp_path / "executor.json").write_text("{garbled")
    skipped = write_run_files(tmp_path, info, set())
    assert [s.split(" ", 1)[0] for s in skipped] == ["categories.json", "executor.json"]
    assert (tmp_path / "categories.json").read_text() == '{"name": "not a list"}'
    assert (tmp_path / "executor.json").read_text() == "{garbled"
    env = parse_properties((tmp_path / "environment.properties").read_text())
    assert env["ray.versions.tested"] == "none"
