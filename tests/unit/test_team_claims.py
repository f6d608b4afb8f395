"""A team's own claims beside raychaos': the catalogue merge and the CLI (no Docker)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.errors import ChaosError
from chaos.report.catalogue import (
    RESULTS_COPY,
    TEAM_ENV,
    load_catalogue,
    team_file,
    use_team_file,
)

TEAM = """
[[family]]
id = "ACME"
feature = "Acme ingestion"
doc = "https://wiki.acme.example/ray/ingestion"
severity = "critical"

[[claim]]
id = "ACME-01"
family = "ACME"
fault = "a spot worker is preempted mid-batch"
outcome = "the ingestion job finishes with every record written once"
doc = "https://wiki.acme.example/ray/ingestion#spot"
source = "Acme runbook: ingestion on spot nodes"
"""


@pytest.fixture(autouse=True)
def ours_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts and ends with raychaos' catalogue alone in effect."""
    monkeypatch.delenv(TEAM_ENV, raising=False)
    use_team_file(None)
    yield
    use_team_file(None)


def team(tmp_path: Path, text: str = TEAM) -> Path:
    path = tmp_path / "claims.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_team_catalogue_adds_its_claims_after_ours(tmp_path: Path) -> None:
    ours = load_catalogue()
    merged = use_team_file(team(tmp_path))
    assert merged.ids == (*ours.ids, "ACME-01")
    assert load_catalogue().get("ACME-01").feature == "Acme ingestion"
    assert merged.families["ACME"].severity == "critical"
    assert team_file() == tmp_path / "claims.toml"
    assert "TASK-01" in merged and ours.get("TASK-01") == merged.get("TASK-01")


def test_a_family_of_ours_in_a_team_file_is_a_clash_and_nothing_changes(tmp_path: Path) -> None:
    clash = TEAM.replace('"ACME"', '"TASK"').replace("ACME-01", "TASK-99")
    with pytest.raises(ChaosError, match=r"family TASK is one of raychaos' own .*prefix"):
        use_team_file(team(tmp_path, clash))
    assert team_file() is None and "TASK-99" not in load_catalogue()


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda t: t.replace('severity = "critical"', 'severity = "huge"'), "severity 'huge'"),
        (lambda t: t.replace('id = "ACME-01"', 'id = "ACME-1"'), "is not FAMILY-NN"),
        (lambda t: t.replace("[[claim]]", "[[claims]]"), "unexpected top-level key"),
        (lambda t: t + "\n[[claim]]\nid =", "is not valid TOML"),
    ],
)
def test_a_malformed_team_file_is_one_line_naming_the_file(
    tmp_path: Path, edit: object, said: str
) -> None:
    path = team(tmp_path, edit(TEAM))  # type: ignore[operator]
    with pytest.raises(ChaosError) as raised:
        use_team_file(path)
    assert said in str(raised.value) and str(path) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_claims_lists_a_teams_claims_from_the_option_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = team(tmp_path)
    assert main(["claims", "ACME-*", "--claims-file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ACME-01" in out and "Acme ingestion" in out
    use_team_file(None)
    monkeypatch.setenv(TEAM_ENV, str(path))
    assert main(["claims", "ACME-01"]) == 0
    assert "a spot worker is preempted" in capsys.readouterr().out


def test_a_missing_team_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["claims", "--claims-file", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read the claim catalogue" in err[0], err


def test_coverage_and_compare_read_the_copy_a_run_left_beside_its_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    result = {
        "uuid": "acme-1",
        "name": "test_ingestion_survives_a_spot_loss[2.60.0]",
        "historyId": "acme-1",
        "status": "passed",
        "statusDetails": {"message": ""},
        "labels": [{"name": "claim", "value": "ACME-01"}],
        "parameters": [{"name": "raychaos.ray_version", "value": "'2.60.0'", "excluded": True}],
    }
    (results / "acme-1-result.json").write_text(json.dumps(result))
    (results / RESULTS_COPY).write_text(TEAM, encoding="utf-8")
    main(["coverage", str(results), "--claims", "ACME-*"])
    out = capsys.readouterr().out
    assert re.search(r"ACME-01\s+passed", out) and "1 verified" in out, out
    candidate = tmp_path / "candidate"
    shutil.copytree(results, candidate)
    page = tmp_path / "compare.html"
    assert main(["compare", str(results), str(candidate), "-o", str(page)]) == 0
    assert "ACME-01" in capsys.readouterr().out and "ACME-01" in page.read_text()


def test_the_run_files_carry_the_teams_catalogue_only_when_there_is_one(tmp_path: Path) -> None:
    from chaos.plugin.results.runfiles import RunInfo, write_run_files

    info = RunInfo("r1", "2.60.0", "default", "raychaos/ray:2.60.0-py3.11", 0, tmp_path)
    write_run_files(tmp_path, info, {"2.60.0"})
    assert not (tmp_path / RESULTS_COPY).exists()
    write_run_files(tmp_path, dataclasses.replace(info, team_claims=TEAM), {"2.60.0"})
    assert (tmp_path / RESULTS_COPY).read_text(encoding="utf-8") == TEAM
