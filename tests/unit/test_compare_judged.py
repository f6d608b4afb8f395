"""`raychaos compare` judges a claim only where it was evaluated, and shows every window.

Issue 19, part 3: a failed body made INV-01/INV-02 regressions too (with NET-01's text), and
the windows measured on each side never appeared side by side.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from test_compare import FINDING_ERROR, FINDING_MSG, Results, raychaos

from chaos.experiment import POSTCONDITIONS, Experiment
from chaos.report.catalogue import load_catalogue
from chaos.report.compare import (
    REGRESSION,
    UNCHANGED,
    WINDOW_MOVED,
    Comparison,
    compare,
    pick_sides,
)
from chaos.report.compare_table import lines, render_markdown
from chaos.report.coverage import NOT_JUDGED, coverage, load_raychaos
from chaos.report.html import write_report
from chaos.report.model import CHECK_STEP, load_results

INV = POSTCONDITIONS
BODY_FAILED = "AssertionError: the retry never ran: NodeDiedError"
#: Claims no result here names: the catalogue but the 8 the experiments below verify.
UNRUN = len(load_catalogue()) - 8


def _uuid(name: str, version: str, count: int) -> str:
    """The uuid test_compare.Results gives its ``count``-th result."""
    return f"{name}-{version}-{count}".replace("[", "_").replace("]", "_")


def teardown(r: Results, name: str, version: str, checks: dict[str, str]) -> None:
    """The experiment fixture's container for the result just added: its ``check:`` steps."""
    steps = [{"name": f"check: {claim} …", "status": status} for claim, status in checks.items()]
    container = {
        "uuid": f"c{r.count}",
        "children": [_uuid(name, version, r.count)],
        "befores": [{"name": "experiment", "status": "passed"}],
        "afters": [{"name": "experiment::0", "status": "passed", "steps": steps}],
    }
    (r.directory / f"c{r.count}-container.json").write_text(json.dumps(container))


def _suite(r: Results, version: str, *, retry: float, failed: bool, labels: bool = True) -> None:
    """Four experiments; on ``failed`` the TASK-04/05 body fails (its postconditions: not run).

    ``labels``: the failed result carries INV-01/INV-02 like every other (a writer that labels
    every experiment); raychaos itself labels them only when it checks them.
    """
    inv = INV if labels or not failed else ()
    # NET-01 first: its finding is the first message under INV-01/INV-02.
    r.add(
        "test_partition", version, ("NET-01", *INV), "skipped", FINDING_MSG, finding=FINDING_ERROR
    )
    r.add(
        "test_node_death_fails_or_retries_its_task",
        version,
        ("TASK-04", "TASK-05", *inv),
        "failed" if failed else "passed",
        BODY_FAILED if failed else None,
        measurements={
            "TASK-04 kill → NodeDiedError (s)": 1.4 if version == "2.50.1" else 0.3,
            "TASK-05 kill → retry done (s)": retry,
            "health-check band": "[1.0 s, 18.0 s]",
        },
    )
    r.add("test_retried", version, ("TASK-01", "TASK-02", *INV), measurements={"w (s)": 6.3})
    r.add("test_restart", version, ("NODE-03", *INV), measurements={"back (s)": 4.0})


def _compare(tmp_path: Path, *, labels: bool = True) -> Comparison:
    base, candidate = Results(tmp_path / "a"), Results(tmp_path / "b")
    _suite(base, "2.50.1", retry=60.8, failed=False)
    _suite(candidate, "2.60.0", retry=3.8, failed=True, labels=labels)
    return compare(*pick_sides(base.directory, candidate.directory), load_catalogue())


@pytest.mark.parametrize("labels", [True, False], ids=["inv-labelled", "as-raychaos-labels"])
def test_a_failed_body_regresses_its_own_claims_only(tmp_path: Path, labels: bool) -> None:
    result = _compare(tmp_path, labels=labels)
    rows = {r.claim: r for r in result.rows}
    assert [r.claim for r in result.rows if r.change == REGRESSION] == ["TASK-04", "TASK-05"]
    assert rows["TASK-05"].detail == BODY_FAILED  # the result that decided it
    for claim in INV:
        row = rows[claim]
        assert row.change == UNCHANGED, row
        assert (row.base.shown, row.candidate.shown) == ("passed 4/4", "passed 3/3")
        assert "FINDING" not in row.detail and "partition" not in row.detail
        if labels:
            assert row.detail == (
                "not judged by test_node_death_fails_or_retries_its_task on Ray 2.60.0: "
                "it failed before this check ran"
            )
            assert row.candidate.unjudged[0].message == BODY_FAILED
        else:
            assert row.detail == ""
    assert result.count(REGRESSION) == 2 and result.exit_code == 1


def test_compare_shows_windows_side_by_side_for_every_measured_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, candidate = Results(tmp_path / "a"), Results(tmp_path / "b")
    _suite(base, "2.50.1", retry=60.8, failed=False)
    _suite(candidate, "2.60.0", retry=3.8, failed=True)
    assert raychaos("compare", str(base.directory), str(candidate.directory)) == 1
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ")][1:]
    assert table == [
        f"| TASK-04 | passed | failed | **regression** | {BODY_FAILED} |",
        "| ↳ kill → NodeDiedError (s) | 1.4 | 0.3 |  | -1.1 (×0.21) |",
        f"| TASK-05 | passed | failed | **regression** | {BODY_FAILED} |",
        "| ↳ kill → retry done (s) | 60.8 | 3.8 | **window moved** | -57 (×0.062), "
        "beyond tolerance |",
        "| TASK-01 | passed | passed | unchanged |  |",
        "| ↳ w (s) | 6.3 | 6.3 |  | +0 (×1) |",
        "| TASK-02 | passed | passed | unchanged |  |",
        "| ↳ w (s) | 6.3 | 6.3 |  | +0 (×1) |",
        "| NODE-03 | passed | passed | unchanged |  |",
        "| ↳ back (s) | 4 | 4 |  | +0 (×1) |",
        "| NET-01 | finding | finding | unchanged |  |",
        "| INV-01 | passed 4/4 | passed 3/3 | unchanged | not judged by "
        "test_node_death_fails_or_retries_its_task on Ray 2.60.0: it failed before this check "
        "ran |",
        "| INV-02 | passed 4/4 | passed 3/3 | unchanged | not judged by "
        "test_node_death_fails_or_retries_its_task on Ray 2.60.0: it failed before this check "
        "ran |",
    ]
    # The legend states the tolerance; claims run on neither side are one line.
    assert "medians differ by ×2 or more and by 20 s or more" in out
    assert re.search(rf"^Not run on either side: {UNRUN} claims$", out, re.M), out


def test_a_window_alone_moves_an_unchanged_claim(tmp_path: Path) -> None:
    base, candidate = Results(tmp_path / "a"), Results(tmp_path / "b")
    for r, v, retry in ((base, "2.50.1", 60.8), (candidate, "2.60.0", 3.8)):
        _suite(r, v, retry=retry, failed=False)
    result = compare(*pick_sides(base.directory, candidate.directory), load_catalogue())
    rows = {r.claim: r for r in result.rows}
    assert rows["TASK-05"].change == WINDOW_MOVED
    assert rows["TASK-04"].change == UNCHANGED  # 1.4 → 0.3 s: within the tolerance
    # TASK-04's window is TASK-04's only; the body's unnamed windows are every body claim's,
    # never a postcondition's.
    assert [w.label for w in rows["TASK-05"].windows] == ["kill → retry done (s)"]
    assert [w.label for w in rows["TASK-01"].windows] == ["w (s)"]
    assert rows["INV-01"].windows == ()
    assert result.exit_code == 0
    # Changes first, then the unchanged claims.
    assert [r.claim for r in rows.values() if r.change == WINDOW_MOVED] == ["TASK-05"]
    assert [line.claim for line in lines(result) if line.row][:2] == ["TASK-05", "TASK-01"]


def test_teardown_steps_say_which_postcondition_failed(tmp_path: Path) -> None:
    """INV-02 is checked first: when it fails, INV-01 never ran and the body had passed."""
    base, candidate = Results(tmp_path / "a"), Results(tmp_path / "b")
    died = "AssertionError: INV-02: nodes died that the experiment did not kill: worker-2"
    for r, v in ((base, "2.59.0"), (candidate, "2.60.0")):
        bad = r is candidate
        r.add(
            "test_kill",
            v,
            ("NODE-01", *INV),
            "failed" if bad else "passed",
            died if bad else None,
        )
        teardown(r, "test_kill", v, {"INV-02": "failed"} if bad else dict.fromkeys(INV, "passed"))
        r.add("test_other", v, ("NODE-02", *INV))
    loaded = load_results(candidate.directory)
    assert {t.name: t.checks for t in loaded.tests}["test_kill[2.60.0]"] == (("INV-02", "failed"),)
    result = compare(*pick_sides(base.directory, candidate.directory), load_catalogue())
    rows = {r.claim: r for r in result.rows}
    assert [r.claim for r in result.rows if r.change == REGRESSION] == ["INV-02"]
    assert rows["INV-02"].detail == died
    assert rows["INV-02"].candidate.shown == "failed 1/2"
    assert rows["INV-01"].change == UNCHANGED
    assert rows["INV-01"].candidate.shown == "passed" and rows["INV-01"].candidate.unjudged
    assert rows["NODE-01"].change == UNCHANGED  # its body passed before the teardown failed


def test_without_steps_the_message_names_the_postcondition(tmp_path: Path) -> None:
    r = Results(tmp_path / "run")
    settle = "AssertionError: INV-01: resources did not settle within 60 s"
    r.add("test_leaky", "2.60.0", ("TASK-02", *INV), "failed", settle)
    r.add("test_body", "2.60.0", ("TASK-03", *INV), "broken", "WorkloadTimeout: not within 30 s")
    cov = coverage(load_raychaos(r.directory), load_catalogue(), ["TASK-02", "TASK-03", *INV])
    assert cov.cell("INV-01", "2.60.0").shown == "failed"
    # INV-02 ran before INV-01 but the message alone cannot say so: not judged by either.
    assert cov.cell("INV-02", "2.60.0").shown == NOT_JUDGED
    assert cov.cell("TASK-02", "2.60.0").verdict == "passed"  # the body held
    assert cov.cell("TASK-03", "2.60.0").verdict == "broken"


def test_the_report_shows_the_same_table_in_the_same_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Markdown, the compare page and `raychaos report` of one directory: one order."""
    r = Results(tmp_path / "both")
    _suite(r, "2.50.1", retry=60.8, failed=False)
    _suite(r, "2.60.0", retry=3.8, failed=True)
    page = tmp_path / "cmp.html"
    assert raychaos("compare", str(r.directory), "-o", str(page)) == 1
    markdown = [
        line.split(" | ")[0].removeprefix("| ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and not line.startswith(("| claim", "|---"))
    ]
    assert markdown[:4] == [
        "TASK-04",
        "↳ kill → NodeDiedError (s)",
        "TASK-05",
        "↳ kill → retry done (s)",
    ]
    report = tmp_path / "summary.html"
    write_report(r.directory, report)
    text = report.read_text()
    section = text.split("<h2>Ray 2.50.1 → Ray 2.60.0</h2>", 1)[1].split("<h2>", 1)[0]
    for html in (page.read_text(), section):
        shown = re.findall(r"<tr(?: class=\"muted\")?><t[hd]>([^<]+)</t[hd]>", html)
        assert shown[1:] == markdown  # after the header row
        assert "<td>60.8</td><td>3.8</td>" in html
        assert f"Not run on either side: {UNRUN} claims" in html
    # The report's matrix: the failed body judged no postcondition.
    assert re.search(r'<tr><th>INV-01</th><td>[^<]*</td><td class="s passed"', text)
    assert "test_node_death_fails_or_retries_its_task[2.60.0]: not judged" in text


def test_the_postconditions_steps_are_titled_as_the_report_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """chaos.experiment.kit's check steps name their claim first (model.CHECK_STEP)."""
    import chaos.experiment.kit

    titles: list[str] = []

    class Recorded:
        def __init__(self, title: str) -> None:
            titles.append(title)

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(chaos.experiment.kit, "step", Recorded)
    kit = Experiment(cast(Any, None), cast(Any, None), cast(Any, None))
    monkeypatch.setattr(kit, "_check_no_unexpected_death", lambda: None)
    monkeypatch.setattr(kit, "_check_resources_settle", lambda: None)
    kit.check_no_unexpected_death()
    kit.check_resources_settle()
    assert [m.group(1) for t in titles if (m := CHECK_STEP.match(t))] == ["INV-02", "INV-01"]


def test_markdown_of_a_comparison_without_windows_has_no_legend(tmp_path: Path) -> None:
    base, candidate = Results(tmp_path / "a"), Results(tmp_path / "b")
    base.add("test_lineage", "2.59.0", ("OBJ-01",))
    candidate.add("test_lineage", "2.60.0", ("OBJ-01",), "failed", "AssertionError: lost")
    result = compare(*pick_sides(base.directory, candidate.directory), load_catalogue())
    out = render_markdown(result)
    assert "| OBJ-01 | passed | failed | **regression** | AssertionError: lost |" in out
    assert "Windows (" not in out
