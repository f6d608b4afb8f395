"""`raychaos coverage` and `raychaos compare` over small Allure results directories (JSON)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from chaos.cli import main
from chaos.report.catalogue import load_catalogue
from chaos.report.claims import FINDING_ABOUT_LABEL, FINDING_LABEL, SCHEMA, SCHEMA_LABEL
from chaos.report.compare import (
    CHANGED,
    EXCEPTION_CHANGED,
    FINDING_GONE,
    MISSING_ONE_SIDE,
    NEW_FINDING,
    NOT_RUN,
    NOW_PASSES,
    REGRESSION,
    UNCHANGED,
    WINDOW_MOVED,
    classify,
    compare,
    pick_sides,
)
from chaos.report.coverage import coverage, load_raychaos, verdict_of
from chaos.report.html import write_report
from chaos.report.model import load_results
from chaos.report.stats import BEYOND_NOISE, BEYOND_TOLERANCE

LOST = "AssertionError: {'type': 'ObjectLostError', 'bases': ['RayError']}\nassert 'ObjectLostError' == 'ObjectReconstructionFailedError'"
RECON = "AssertionError: {'type': 'ObjectReconstructionFailedError', 'reason': 'OBJECT_UNRECONSTRUCTABLE_RETRIES_DISABLED'}"
FINDING_MSG = "XFAIL FINDING: not retried under a partition\n\nAssertionError: still waiting"
#: The exception class of FINDING_MSG's finding, as the plugin labels it (``raychaos.finding``).
FINDING_ERROR = "AssertionError"


def raychaos(*argv: str) -> int:
    """The claim commands as `raychaos` runs them (a ChaosError is a one-line usage error)."""
    return main(list(argv))


class Results:
    """Writes Allure result files the way allure-pytest and raychaos do."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def add(
        self,
        name: str,
        version: str | None,
        claims: tuple[str, ...],
        status: str = "passed",
        message: str | None = None,
        *,
        history: str | None = None,
        measurements: dict[str, Any] | None = None,
        details: bool = True,
        finding: str | None = None,
        about: tuple[str, ...] = (),
        held: tuple[str, ...] = (),
        trial: int | None = None,
    ) -> None:
        """``finding``: the exception class of the finding the body raised, labelled as
        :mod:`chaos.plugin.allure` labels it (with the schema label raychaos writes on every
        result); ``about``: the claims it is about (``raychaos.finding.claim``, written at
        set-up); ``held``: claims the body recorded held (passed ``verdict:`` steps);
        ``trial``: the ``--raychaos-trials`` trial (one historyId for every trial)."""
        self.count += 1
        uuid = f"{name}-{version}-{self.count}".replace("[", "_").replace("]", "_")
        test = f"{name}[{version}]" if version else name
        shown = f"{name}[{version}-trial{trial}]" if trial is not None else test
        data: dict[str, Any] = {
            "uuid": uuid,
            "name": shown,
            "fullName": f"experiments.test_x#{name}",
            "historyId": history or f"h-{test}",
            "status": status,
            "start": 1000 * self.count,
            "stop": 1000 * self.count + 500,
            "labels": [{"name": "claim", "value": c} for c in claims],
            "parameters": [
                {"name": "raychaos.ray_version", "value": f"'{version}'", "excluded": True}
            ]
            if version
            else [],
        }
        if trial is not None:
            data["parameters"].append(
                {"name": "raychaos_trial", "value": str(trial), "excluded": True}
            )
        if finding is not None or about:
            data["labels"] += [
                {"name": SCHEMA_LABEL, "value": SCHEMA},
                *({"name": FINDING_ABOUT_LABEL, "value": c} for c in about),
                *([{"name": FINDING_LABEL, "value": finding}] if finding is not None else []),
            ]
        if held:
            data["steps"] = [{"name": f"verdict: {c} held — x", "status": "passed"} for c in held]
        if details and (message is not None or status != "passed"):
            data["statusDetails"] = {"message": message or "", "trace": "Traceback: …"}
        if measurements is not None:
            source = f"{uuid}-attachment.json"
            (self.directory / source).write_text(json.dumps(measurements))
            data["attachments"] = [
                {"name": "measurements", "source": source, "type": "application/json"}
            ]
        (self.directory / f"{uuid}-result.json").write_text(json.dumps(data))


@pytest.fixture
def upgrade(tmp_path: Path) -> Path:
    """One directory, Ray 2.59.0 and 2.60.0, one of each change."""
    r = Results(tmp_path / "both")
    for v in ("2.59.0", "2.60.0"):
        r.add("test_retried", v, ("TASK-01", "TASK-02"))
        r.add("test_plain_guest_test", None, ())  # a repository's own test: not ours
    # regression: passed → failed
    r.add("test_lineage", "2.59.0", ("OBJ-01",))
    r.add("test_lineage", "2.60.0", ("OBJ-01",), "failed", "AssertionError: the read failed")
    # a recorded finding whose test passes: allure-pytest writes no status details at all
    r.add("test_partition", "2.59.0", ("NET-01",), "skipped", FINDING_MSG, finding=FINDING_ERROR)
    r.add("test_partition", "2.60.0", ("NET-01",), "failed", details=False)
    # new finding
    r.add("test_spill", "2.59.0", ("STORE-02",))
    r.add(
        "test_spill",
        "2.60.0",
        ("STORE-02",),
        "skipped",
        "XFAIL FINDING: no error\n\nx",
        finding="CheckFailed",
    )
    # exception class and reason changed, both failed
    r.add("test_no_retries", "2.59.0", ("OBJ-02",), "failed", LOST)
    r.add("test_no_retries", "2.60.0", ("OBJ-02",), "failed", RECON)
    # missing on one side
    r.add("test_redis", "2.60.0", ("GCS-03",))
    # a harness failure fixed
    r.add("test_head", "2.59.0", ("GCS-01",), "failed", "DockerOperationError: no space left")
    r.add("test_head", "2.60.0", ("GCS-01",))
    return r.directory


def test_verdicts_and_change_classes() -> None:
    assert classify("passed", "failed") == REGRESSION
    assert classify("passed", "broken") == REGRESSION
    assert classify("finding", "finding gone") == FINDING_GONE
    assert classify("passed", "finding gone") == FINDING_GONE
    assert classify("finding", "passed") == FINDING_GONE
    assert classify("passed", "finding") == NEW_FINDING
    assert classify("failed", "passed") == NOW_PASSES
    assert classify("missing", "passed") == MISSING_ONE_SIDE
    assert classify("passed", "missing") == MISSING_ONE_SIDE
    assert classify("missing", "missing") == NOT_RUN
    assert classify("passed", "skipped") == CHANGED
    assert classify("finding", "failed") == CHANGED
    assert classify("skipped", "skipped") == UNCHANGED


def test_compare_two_releases_of_one_directory(upgrade: Path) -> None:
    base, candidate = pick_sides(upgrade)
    assert (base.release, candidate.release) == ("2.59.0", "2.60.0")
    result = compare(base, candidate, load_catalogue())
    rows = {r.claim: r for r in result.rows}
    assert len(rows) == len(load_catalogue())
    assert rows["TASK-01"].change == UNCHANGED and rows["TASK-01"].base.verdict == "passed"
    assert rows["OBJ-01"].change == REGRESSION
    assert rows["OBJ-01"].detail == "AssertionError: the read failed"
    net = rows["NET-01"]
    assert (net.base.verdict, net.candidate.verdict, net.change) == (
        "finding",
        "finding gone",
        FINDING_GONE,
    )
    assert net.detail == "FINDING: not retried under a partition"
    assert rows["STORE-02"].change == NEW_FINDING
    obj02 = rows["OBJ-02"]
    assert obj02.change == EXCEPTION_CHANGED
    assert obj02.detail == (
        "ObjectLostError, RayError → ObjectReconstructionFailedError, "
        "reason OBJECT_UNRECONSTRUCTABLE_RETRIES_DISABLED"
    )
    assert rows["GCS-03"].change == MISSING_ONE_SIDE
    assert (rows["GCS-01"].base.verdict, rows["GCS-01"].change) == ("broken", NOW_PASSES)
    assert rows["GCS-01"].detail == "was: DockerOperationError: no space left"
    assert rows["ACTOR-01"].change == NOT_RUN
    assert result.count(REGRESSION) == 1 and result.exit_code == 1


def test_compare_command_prints_markdown_writes_html_and_fails_on_a_regression(
    upgrade: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "out" / "cmp.html"
    assert raychaos("compare", str(upgrade), "-o", str(page)) == 1
    out, err = capsys.readouterr()
    assert out.startswith("# raychaos compare: Ray 2.59.0 → Ray 2.60.0\n")
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| claim | Ray 2.59.0 | Ray 2.60.0 | change | detail |"
    # Most important first: the regression, then the findings.
    assert (
        table[1]
        == "| OBJ-01 | passed | failed | **regression** | AssertionError: the read failed |"
    )
    assert table[2].startswith("| STORE-02 | passed | finding | new finding |")
    assert table[3].startswith("| NET-01 | finding | finding gone | finding no longer reproduces |")
    # Then the unchanged claims, in catalogue order; claims run nowhere are only counted.
    assert table[-2:] == [
        "| TASK-01 | passed | passed | unchanged |  |",
        "| TASK-02 | passed | passed | unchanged |  |",
    ]
    unrun = len(load_catalogue()) - 8  # the catalogue but the 8 claims the results above name
    assert re.search(rf"^Not run on either side: {unrun} claims$", out, re.M), out
    assert "| ACTOR-01 |" not in out  # not run anywhere: counted, not tabled
    assert out.rstrip().endswith("Result: 1 regression(s)")
    assert f"raychaos: compare page {page}" in err
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html
    assert '<span class="pill failed">regression</span>' in html
    assert '<span class="pill passed">finding no longer reproduces</span>' in html
    assert "<th>OBJ-02</th>" in html and "ObjectReconstructionFailedError" in html


def test_compare_two_directories_without_a_regression_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = Results(tmp_path / "a"), Results(tmp_path / "b")
    before.add(
        "test_partition", "2.60.0", ("NET-01",), "skipped", FINDING_MSG, finding=FINDING_ERROR
    )
    after.add(
        "test_partition",
        "2.60.0",
        ("NET-01",),
        "failed",
        "[XPASS(strict)] FINDING: not retried under a partition",
    )
    before.add("test_retried", "2.60.0", ("TASK-01",))
    after.add("test_retried", "2.60.0", ("TASK-01",))
    code = raychaos(
        "compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "p.html")
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "| NET-01 | finding | finding gone | finding no longer reproduces |" in out
    assert "**regression**" not in out
    assert out.rstrip().endswith("Result: no regression")


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["{a}", "{a}"], "is compared with itself"),
        (
            ["{a}", "--base-version", "2.60.0", "--candidate-version", "2.60.0"],
            "Ray 2.60.0 is compared with itself",
        ),
        (
            ["{a}", "--base-version", "2.58.0"],
            "has no results for Ray 2.58.0 (it holds 2.59.0, 2.60.0)",
        ),
        (["{one}"], "holds Ray 2.60.0: expected exactly two releases"),
        (["{a}", "{one}"], "holds Ray 2.59.0, 2.60.0: choose one with --base-version"),
        (["{guest}", "{a}"], "holds no raychaos results (1 Allure result file(s)"),
        (["{absent}", "{a}"], "is not one"),
    ],
)
def test_compare_usage_errors_exit_2_on_one_line(
    upgrade: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    error: str,
) -> None:
    one = Results(tmp_path / "one")
    one.add("test_retried", "2.60.0", ("TASK-01",))
    guest = Results(tmp_path / "guest")
    guest.add("test_theirs", None, ())
    dirs = {"a": upgrade, "one": one.directory, "guest": guest.directory, "absent": tmp_path / "x"}
    assert raychaos("compare", *(a.format(**dirs) for a in argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("raychaos: error: ") and error in err, err
    assert err.count("\n") == 1


def test_same_directory_with_two_versions_and_one_version_given(upgrade: Path) -> None:
    base, candidate = pick_sides(upgrade, upgrade, "2.60.0", "2.59.0")
    assert (base.release, candidate.release) == ("2.60.0", "2.59.0")
    base, candidate = pick_sides(upgrade, None, None, "2.59.0")
    assert (base.release, candidate.release) == ("2.60.0", "2.59.0")
    result = compare(base, candidate, load_catalogue())
    rows = {r.claim: r for r in result.rows}
    # Downgrading: the failure on 2.60.0 now passes, the finding is no longer there.
    assert rows["OBJ-01"].change == NOW_PASSES
    assert rows["STORE-02"].change == FINDING_GONE
    assert rows["STORE-02"].candidate.verdict == "passed"
    # …and the harness failure of 2.59.0 is a regression from 2.60.0's pass.
    assert rows["GCS-01"].change == REGRESSION and result.exit_code == 1


def test_windows_move_beyond_trial_noise_or_the_single_trial_tolerance(tmp_path: Path) -> None:
    r = Results(tmp_path / "trials")
    for value in (6.1, 6.4, 6.2):
        r.add(
            "test_kill",
            "2.59.0",
            ("NODE-01",),
            history="h59",
            measurements={"kill → DEAD (s)": value},
        )
    for value in (9.0, 9.3):
        r.add(
            "test_kill",
            "2.60.0",
            ("NODE-01",),
            history="h60",
            measurements={"kill → DEAD (s)": value},
        )
    # one trial each: held against the tolerance
    r.add("test_raylet", "2.59.0", ("NODE-02",), measurements={"kill → DEAD (s)": 5.0})
    r.add("test_raylet", "2.60.0", ("NODE-02",), measurements={"kill → DEAD (s)": 50.0})
    # a trials mapping inside one result, overlapping ranges: no move
    r.add("test_restart", "2.59.0", ("NODE-03",), measurements={"trials": {"back (s)": [3, 4, 5]}})
    r.add("test_restart", "2.60.0", ("NODE-03",), measurements={"trials": {"back (s)": [4.5, 6]}})
    results = load_results(r.directory)
    assert len(results.tests) == 6 and len(results.runs) == 9  # trials fold, runs keep them
    result = compare(*pick_sides(r.directory), load_catalogue())
    rows = {row.claim: row for row in result.rows}
    assert rows["NODE-01"].change == WINDOW_MOVED
    (window,) = rows["NODE-01"].windows
    assert (window.label, str(window.base), str(window.candidate), window.moved) == (
        "kill → DEAD (s)",
        "6.2 (6.1–6.4, 3 trials)",
        "9.15 (9–9.3, 2 trials)",
        BEYOND_NOISE,
    )
    # One trial each: ×10 and 45 s apart is beyond the stated tolerance.
    assert rows["NODE-02"].change == WINDOW_MOVED
    assert rows["NODE-02"].windows[0].moved == BEYOND_TOLERANCE
    assert rows["NODE-03"].change == UNCHANGED and not rows["NODE-03"].windows[0].moved
    assert str(rows["NODE-03"].windows[0].candidate) == "5.25 (4.5–6, 2 trials)"
    assert result.exit_code == 0


def test_coverage_counts_each_release_and_a_skip_verifies_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Results(tmp_path / "run")
    catalogue = load_catalogue()
    for claim in catalogue.ids:
        for v in ("2.59.0", "2.60.0"):
            r.add(f"test_{claim}", v, (claim,))
    r.add(
        "test_NET-01",
        "2.60.0",
        ("NET-01",),
        "skipped",
        FINDING_MSG,
        history="h-net",
        finding=FINDING_ERROR,
    )
    r.add("test_late", "2.59.0", ("VER-01",), "skipped", "Skipped: needs a second image")
    cov = coverage(load_raychaos(r.directory), catalogue)
    assert cov.releases == ("2.59.0", "2.60.0")
    total = len(catalogue)
    assert cov.counts("2.60.0") == {
        "verified": total - 1, "finding": 1, "inconclusive": 0, "skipped": 0,
        "failed/broken": 0, "missing": 0,
    }  # fmt: skip
    assert cov.counts("2.59.0")["skipped"] == 1
    assert cov.cell("VER-01", "2.59.0").shown == "skipped 1/2"
    assert not cov.accounted("VER-01", strict=False)
    assert cov.accounted("NET-01", strict=False) and not cov.accounted("NET-01", strict=True)
    assert raychaos("coverage", str(r.directory)) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(
        f"raychaos coverage of {r.directory}: {len(load_catalogue())} claims × Ray 2.59.0, 2.60.0"
    )
    assert re.search(r"^VER-01 +skipped 1/2 +passed +✗$", out, re.M), out
    assert re.search(r"^NET-01 +passed +finding 1/2$", out, re.M), out
    assert (
        f"Ray 2.59.0: {total - 1} verified, 0 finding, 0 inconclusive, 1 skipped, "
        "0 failed/broken, 0 missing" in out
    )
    assert f"on every release: {total - 1}/{total} claims" in out


def test_postconditions_after_a_finding_are_verified_not_a_finding(tmp_path: Path) -> None:
    """INV-01/INV-02 are checked at teardown: on a recorded finding (body xfailed) they held;
    the body's finding is not theirs. A result broken at teardown is theirs to fail."""
    r = Results(tmp_path / "run")
    inv = ("INV-01", "INV-02")
    r.add(
        "test_partition", "2.60.0", ("NET-01", *inv), "skipped", FINDING_MSG, finding=FINDING_ERROR
    )
    r.add("test_retried", "2.60.0", ("TASK-01", *inv))
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["NET-01", "TASK-01", *inv])
    assert cov.cell("NET-01", "2.60.0").verdict == "finding"
    assert cov.cell("INV-01", "2.60.0").shown == "passed 2/2"
    r.add("test_leaky", "2.60.0", ("TASK-02", *inv), "broken", "INV-01: resources did not settle")
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["INV-01"])
    assert cov.cell("INV-01", "2.60.0").shown == "broken 1/3"


def test_coverage_exit_codes_strict_and_selected_claims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Results(tmp_path / "run")
    r.add("test_retried", "2.60.0", ("TASK-01", "TASK-02"))
    r.add("test_partition", "2.60.0", ("NET-01",), "skipped", FINDING_MSG, finding=FINDING_ERROR)
    r.add("test_gone", "2.60.0", ("NET-02",), "failed", details=False)
    r.add("test_custom", "2.60.0", ("MY-01",))
    d = str(r.directory)
    assert raychaos("coverage", d, "--claims", "TASK-0[12],NET-01") == 0
    assert raychaos("coverage", d, "--claims", "TASK-0[12],NET-01", "--strict") == 1
    assert raychaos("coverage", d, "--claims", "NET-02") == 1
    assert raychaos("coverage", d) == 1  # the catalogue but 4 claims missing
    out = capsys.readouterr().out
    assert re.search(r"^NET-02 +finding gone +✗$", out, re.M), out
    assert (
        "Ray 2.60.0: 2 verified, 1 finding, 0 inconclusive, 0 skipped, 1 failed/broken, "
        f"{len(load_catalogue()) - 4} missing" in out
    )
    assert "not in the claim catalogue: MY-01" in out
    assert verdict_of(load_results(r.directory).tests[0]) in {"passed", "finding", "finding gone"}


@pytest.mark.parametrize(
    ("make", "error"),
    [
        ("file", "is not one"),
        ("empty", "holds no raychaos results (0 Allure result file(s)"),
        ("guest", "holds no raychaos results (1 Allure result file(s)"),
    ],
)
def test_coverage_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str, error: str
) -> None:
    target = tmp_path / make
    if make == "file":
        target.write_text("not a directory")
    else:
        Results(target)
        if make == "guest":
            Results(target).add("test_theirs", None, ())
    assert raychaos("coverage", str(target)) == 2
    err = capsys.readouterr().err
    assert err.startswith("raychaos: error: ") and error in err and err.count("\n") == 1, err


def test_the_report_page_explains_a_strict_xpass(upgrade: Path, tmp_path: Path) -> None:
    """allure-pytest leaves a strict XPASS without a message; the page says what it means."""
    page = tmp_path / "summary.html"
    write_report(upgrade, page)
    text = page.read_text()
    assert "[XPASS(strict)] the recorded FINDING no longer reproduces: the test passed" in text
    assert "<tr><th>INV-02</th>" in text  # every catalogue claim has its row
