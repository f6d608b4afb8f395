"""Trial statistics (chaos.report.stats) and how the report and compare use them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaos.report.catalogue import load_catalogue
from chaos.report.claims import FINDING_LABEL, SCHEMA, SCHEMA_LABEL
from chaos.report.compare import REGRESSION, UNCHANGED, compare, pick_sides
from chaos.report.html import write_report
from chaos.report.model import load_results
from chaos.report.stats import (
    BEYOND_NOISE,
    BEYOND_TOLERANCE,
    MOVE_FLOOR,
    MOVE_RATIO,
    Proportion,
    Spread,
    beyond_noise,
    moved,
    numbers,
    trial_groups,
    wilson,
)

counts = st.integers(min_value=1, max_value=500).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
)


@given(counts)
def test_wilson_bounds_lie_in_0_1_and_contain_the_observed_rate(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert low < high, "never a point: N trials leave doubt"


@given(counts, st.integers(min_value=2, max_value=20))
def test_wilson_narrows_with_more_trials_at_the_same_rate(kn: tuple[int, int], m: int) -> None:
    k, n = kn
    low, high = wilson(k, n)
    more_low, more_high = wilson(k * m, n * m)
    assert more_high - more_low < high - low


@given(counts)
def test_wilson_is_symmetric_in_successes_and_failures(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson(k, n)
    flipped_low, flipped_high = wilson(n - k, n)
    assert math.isclose(low, 1 - flipped_high, abs_tol=1e-12)
    assert math.isclose(high, 1 - flipped_low, abs_tol=1e-12)


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (3, 3, (0.4385, 1.0)),  # Wilson's interval for three of three at 95 %
        (0, 3, (0.0, 0.5615)),
        (5, 10, (0.2366, 0.7634)),
        (1, 1, (0.2065, 1.0)),
    ],
)
def test_wilson_known_values(k: int, n: int, expected: tuple[float, float]) -> None:
    low, high = wilson(k, n)
    assert (round(low, 4), round(high, 4)) == expected


@pytest.mark.parametrize(("k", "n"), [(0, 0), (4, 3), (-1, 3)])
def test_wilson_refuses_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson(k, n)


def test_proportion_text() -> None:
    assert str(Proportion(3, 3)) == "3/3 (95 % CI 0.44–1.00)"


@pytest.mark.parametrize(
    ("base", "candidate", "beyond"),
    [
        ((3, 3), (2, 3), True),  # every base trial passed; one candidate trial did not
        ((3, 3), (3, 3), False),
        ((1, 1), (0, 1), True),  # one trial each: passed → failed, as without trials
        ((2, 3), (1, 3), False),  # a flaky base: 0.21–0.94 and 0.06–0.79 overlap
        ((9, 10), (1, 10), True),  # 0.60–0.98 vs 0.02–0.40
        ((1, 10), (9, 10), False),  # better is never a regression
        ((3, 3), (0, 0), False),  # nothing judged on the candidate
    ],
)
def test_a_drop_in_passes_is_beyond_noise_only_when(
    base: tuple[int, int], candidate: tuple[int, int], beyond: bool
) -> None:
    assert beyond_noise(Proportion(*base), Proportion(*candidate)) is beyond


def test_spread_median_range_and_overlap() -> None:
    spread = Spread((6.4, 6.1, 9.0))
    assert (spread.median, spread.low, spread.high) == (6.4, 6.1, 9.0)
    assert str(spread) == "6.4 (6.1–9, 3 trials)"
    assert str(Spread((2.5,))) == "2.5"
    assert spread.overlaps(Spread((8.9, 12.0)))
    assert not spread.overlaps(Spread((9.1, 12.0)))


@pytest.mark.parametrize(
    ("base", "candidate", "why"),
    [
        ((6.1, 6.4, 6.2), (9.0, 9.3), BEYOND_NOISE),  # ranges apart, however close
        ((3.0, 4.0, 5.0), (4.5, 6.0), ""),  # ranges overlap
        ((60.8,), (3.8,), BEYOND_TOLERANCE),  # TASK-05's retry, 2.50.1 → 2.60.0
        ((7.16,), (26.61,), ""),  # ×3.7 but 19.5 s: OBJ-01 on one release, run to run
        ((30.0,), (55.0,), ""),  # 25 s but ×1.8
        ((60.8, 58.0), (3.8,), BEYOND_TOLERANCE),  # one side single: medians and tolerance
        ((0.0,), (25.0,), BEYOND_TOLERANCE),  # from zero: the floor alone
    ],
)
def test_a_window_moved_beyond_trial_noise_or_the_stated_tolerance(
    base: tuple[float, ...], candidate: tuple[float, ...], why: str
) -> None:
    assert moved(Spread(base), Spread(candidate)) == why
    assert moved(Spread(candidate), Spread(base)) == why  # symmetric
    assert (MOVE_RATIO, MOVE_FLOOR) == (2.0, 20.0)  # the legend states them


def test_numbers_of_a_measurement() -> None:
    assert numbers(6.2) == [6.2]
    assert numbers([1, 2.5, "x", True]) == [1.0, 2.5]
    assert numbers({"value": 3, "band": [1, 5]}) == [3.0]
    assert numbers(True) == [] and numbers("6 s") == [] and numbers(float("nan")) == []


# -- results on disk --------------------------------------------------------------------------
class Trials:
    """Allure results as allure-pytest writes them for ``--raychaos-trials``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def add(
        self,
        name: str,
        version: str,
        claim: str,
        trial: int,
        status: str = "passed",
        message: str = "",
        measurements: dict[str, Any] | None = None,
        finding: str | None = None,
    ) -> None:
        """``finding``: the exception class of the finding the trial raised, labelled as the
        plugin labels it (with the schema label raychaos writes)."""
        self.count += 1
        uuid = f"u{self.count}"
        data: dict[str, Any] = {
            "uuid": uuid,
            "name": f"{name}[{version}-trial{trial}]",
            "fullName": f"experiments.test_x#{name}",
            "historyId": f"h-{name}-{version}",
            "testCaseId": f"c-{name}",
            "status": status,
            "start": 1000 * self.count,
            "stop": 1000 * self.count + 500,
            "labels": [{"name": "claim", "value": claim}],
            "parameters": [
                {"name": "raychaos_ray_version", "value": f"'{version}'"},
                {"name": "raychaos_trial", "value": str(trial), "excluded": True},
                {"name": "raychaos.ray_version", "value": f"'{version}'", "excluded": True},
            ],
        }
        if finding is not None:
            data["labels"] += [
                {"name": SCHEMA_LABEL, "value": SCHEMA},
                {"name": FINDING_LABEL, "value": finding},
            ]
        if status != "passed":
            data["statusDetails"] = {"message": message or "AssertionError: x", "trace": "…"}
        if measurements is not None:
            source = f"{uuid}-attachment.json"
            (self.directory / source).write_text(json.dumps(measurements))
            data["attachments"] = [
                {"name": "measurements", "source": source, "type": "application/json"}
            ]
        (self.directory / f"{uuid}-result.json").write_text(json.dumps(data))


def test_trials_group_by_history_and_a_rerun_replaces_its_trial(tmp_path: Path) -> None:
    r = Trials(tmp_path)
    r.add("test_kill", "2.60.0", "NODE-01", 1, measurements={"kill → DEAD (s)": 6.1})
    r.add("test_kill", "2.60.0", "NODE-01", 2, "failed", measurements={"kill → DEAD (s)": 9.0})
    r.add("test_kill", "2.60.0", "NODE-01", 3, measurements={"kill → DEAD (s)": 6.4})
    r.add("test_kill", "2.60.0", "NODE-01", 2, measurements={"kill → DEAD (s)": 6.2})  # rerun
    results = load_results(tmp_path)
    assert len(results.tests) == 1 and len(results.runs) == 4
    (group,) = trial_groups(results.runs)
    assert group.name == "test_kill[2.60.0]"
    assert [t.trial for t in group.runs] == [1, 2, 3]
    assert group.shown == "passed 3/3 (95 % CI 0.44–1.00)"
    assert str(group.spreads(results.blobs)["kill → DEAD (s)"]) == "6.2 (6.1–6.4, 3 trials)"


def test_a_finding_counts_reproductions_and_mixed_trials_name_the_rest(tmp_path: Path) -> None:
    r = Trials(tmp_path)
    for trial in (1, 2):
        r.add(
            "test_gap",
            "2.60.0",
            "NET-01",
            trial,
            "skipped",
            "XFAIL FINDING: not retried",
            finding="AssertionError",
        )
    r.add("test_gap", "2.60.0", "NET-01", 3, "broken", "ClusterBootTimeout: no boot")
    (group,) = trial_groups(load_results(tmp_path).runs)
    assert group.verdict == "broken"
    assert group.shown == "finding 2/3 (95 % CI 0.21–0.94); 1 broken"


def test_the_report_shows_passes_out_of_n_and_windows_with_their_spread(
    tmp_path: Path,
) -> None:
    r = Trials(tmp_path / "results")
    for trial, (status, window) in enumerate([("passed", 6.1), ("failed", 9.0), ("passed", 6.4)]):
        r.add("test_kill", "2.60.0", "NODE-01", trial + 1, status, measurements={"w (s)": window})
    page = tmp_path / "page.html"
    write_report(tmp_path / "results", page, load_catalogue())
    text = page.read_text()
    assert "<h2>Trials</h2>" in text
    assert "passed 2/3 (95 % CI 0.21–0.94); 1 failed" in text
    assert "<td>w (s)</td><td>6.4</td><td>6.1–9</td><td>6.1, 9, 6.4</td>" in text
    # The failed trial is listed although a later trial passed.
    assert "test_kill[2.60.0-trial2]" in text


def test_without_trials_the_report_keeps_its_single_run_tables(tmp_path: Path) -> None:
    r = Trials(tmp_path / "results")
    r.add("test_kill", "2.60.0", "NODE-01", 1, measurements={"w (s)": 6.1})
    page = tmp_path / "page.html"
    write_report(tmp_path / "results", page, load_catalogue())
    assert "<h2>Trials</h2>" not in page.read_text()


def _two_releases(tmp_path: Path, base: list[str], candidate: list[str]) -> Path:
    r = Trials(tmp_path)
    for version, statuses in (("2.59.0", base), ("2.60.0", candidate)):
        for trial, status in enumerate(statuses, start=1):
            r.add("test_kill", version, "NODE-01", trial, status)
    return tmp_path


@pytest.mark.parametrize(
    ("base", "candidate", "change", "note"),
    [
        (["passed"] * 3, ["passed", "failed", "passed"], REGRESSION, "beyond trial noise"),
        (["passed", "failed", "passed"], ["failed", "failed", "passed"], UNCHANGED, "within"),
        (["passed"] * 9 + ["failed"], ["failed"] * 9 + ["passed"], REGRESSION, "beyond"),
        (["passed"] * 3, ["passed"] * 3, UNCHANGED, ""),
    ],
)
def test_compare_calls_a_drop_a_regression_only_beyond_trial_noise(
    tmp_path: Path, base: list[str], candidate: list[str], change: str, note: str
) -> None:
    result = compare(*pick_sides(_two_releases(tmp_path, base, candidate)), load_catalogue())
    row = next(r for r in result.rows if r.claim == "NODE-01")
    assert row.change == change, row
    assert note in row.detail
    assert result.exit_code == (1 if change == REGRESSION else 0)


def test_compare_sees_every_trial_of_a_claim(tmp_path: Path) -> None:
    """The latest trial passed on both sides; an earlier candidate trial failed."""
    directory = _two_releases(tmp_path, ["passed"] * 3, ["failed", "passed", "passed"])
    result = compare(*pick_sides(directory), load_catalogue())
    row = next(r for r in result.rows if r.claim == "NODE-01")
    assert (row.base.shown, row.candidate.shown) == ("passed 3/3", "failed 1/3")
    assert row.change == REGRESSION


def test_compare_windows_meet_across_trial_ids(tmp_path: Path) -> None:
    r = Trials(tmp_path)
    for version, windows in (("2.59.0", (6.1, 6.3, 6.2)), ("2.60.0", (9.0, 9.4, 9.1))):
        for trial, value in enumerate(windows, start=1):
            r.add("test_kill", version, "NODE-01", trial, measurements={"w (s)": value})
    result = compare(*pick_sides(tmp_path), load_catalogue())
    row = next(r for r in result.rows if r.claim == "NODE-01")
    assert row.change == "window moved" and row.detail == ""
    (window,) = row.windows
    assert (window.label, str(window.base), str(window.candidate), window.moved) == (
        "w (s)",
        "6.2 (6.1–6.3, 3 trials)",
        "9.1 (9–9.4, 3 trials)",
        "beyond trial noise",
    )


def test_coverage_counts_every_trial(tmp_path: Path) -> None:
    """A claim is as good as its worst trial, though the last trial passed."""
    from chaos.report.coverage import coverage, load_raychaos

    r = Trials(tmp_path)
    r.add("test_kill", "2.60.0", "NODE-01", 1, "failed")
    r.add("test_kill", "2.60.0", "NODE-01", 2)
    cov = coverage(load_raychaos(tmp_path), load_catalogue(), ["NODE-01"])
    assert cov.cell("NODE-01", "2.60.0").shown == "failed 1/2"
    assert cov.exit_code(strict=False) == 1


def test_a_count_or_a_byte_figure_is_not_judged_by_the_seconds_tolerance() -> None:
    """OBJ-06's owner log "evicted (B)" (-107680 → -107725, one trial) read as a moved window
    when any non-positive median passed the ratio test; bytes have no seconds tolerance."""
    b, c = Spread((-107680.0,)), Spread((-107725.0,))
    assert moved(b, c, seconds=False) == ""
    assert moved(b, c) == ""  # as seconds too: ×1.0004 is no move, whatever the sign
    assert moved(Spread((-5.0,)), Spread((30.0,))) == BEYOND_TOLERANCE  # the sign flipped
    assert moved(Spread((0.0,)), Spread((25.0,))) == BEYOND_TOLERANCE
    assert moved(Spread((1.0, 2.0)), Spread((5.0, 6.0)), seconds=False) == BEYOND_NOISE
