"""`raychaos evidence`: each run's verdict and measurements kept as JSON per claim family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compare import FINDING_ERROR, FINDING_MSG, Results

from chaos.cli import main
from chaos.errors import ChaosError
from chaos.report.evidence import export


def test_runs_land_in_their_families_once(tmp_path: Path) -> None:
    r = Results(tmp_path / "results")
    r.add("test_kill", "2.60.0", ("NODE-01", "TASK-05"), measurements={"kill → DEAD (s)": 6.2})
    r.add("test_partition", "2.60.0", ("NET-01",), "skipped", FINDING_MSG, finding=FINDING_ERROR)
    r.add("test_plain_guest_test", None, ())  # a repository's own test: not ours
    out = tmp_path / "data"

    assert export([r.directory], out) == {"net": 1, "node": 1, "task": 1}
    node = json.loads((out / "node.json").read_text())
    (run,) = node["runs"]
    assert (node["format"], node["family"]) == (1, "NODE")
    assert run["claims"] == ["NODE-01", "TASK-05"]
    assert run["ray_version"] == "2.60.0"
    assert run["status"] == "passed"
    assert run["measurements"] == {"kill → DEAD (s)": 6.2}
    net = json.loads((out / "net.json").read_text())["runs"][0]
    assert (net["status"], net["message"]) == (
        "finding",
        "XFAIL FINDING: not retried under a partition",
    )

    # Exporting the same results again adds nothing; a new run is appended.
    assert export([r.directory], out) == {"net": 0, "node": 0, "task": 0}
    r.add("test_kill", "2.59.0", ("NODE-01",), "failed", "AssertionError: late")
    assert export([r.directory], out)["node"] == 1
    versions = [x["ray_version"] for x in json.loads((out / "node.json").read_text())["runs"]]
    assert sorted(versions) == ["2.59.0", "2.60.0"]


def test_a_foreign_file_is_never_overwritten(tmp_path: Path) -> None:
    r = Results(tmp_path / "results")
    r.add("test_kill", "2.60.0", ("NODE-01",))
    out = tmp_path / "data"
    out.mkdir()
    (out / "node.json").write_text('{"theirs": true}')
    with pytest.raises(ChaosError, match="never overwrites"):
        export([r.directory], out)
    assert (out / "node.json").read_text() == '{"theirs": true}'


def test_cli_says_one_line_when_nothing_is_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Results(tmp_path / "results")
    r.add("test_plain_guest_test", None, ())
    assert main(["evidence", str(r.directory), "--out", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("raychaos: error: expected raychaos results") and "\n" not in err
    assert not (tmp_path / "data").exists()
