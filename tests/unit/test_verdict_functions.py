"""Verdicts as pure functions (chaos.check.verdicts): held, failed, finding and unknown."""

from __future__ import annotations

import pytest

from chaos.check.verdicts import Judging, Verdict, verdict
from chaos.errors import CheckFailed, FaultNotObserved, Finding, MissingEvidence


class WindowTooLong(Finding):
    claims = ("NODE-01",)


@verdict("NODE-01")
def dead_within(j: Judging, seen_at: float | None, killed_at: float, bound: float) -> str:
    if seen_at is None:
        j.unknown("the node's DEAD was never observed")
    window = j.measure("kill → DEAD (s)", seen_at - killed_at, band=(0.0, bound), start=killed_at)
    j.require(window >= 0, f"DEAD {window} s before the kill")
    j.require(window <= bound, f"DEAD {window} s after the kill, bound {bound} s", WindowTooLong)
    return f"DEAD {window} s after the kill"


def test_a_claim_that_held_carries_its_evidence_and_measurements() -> None:
    held = dead_within(14.0, 10.0, 9.0)
    assert held == Verdict(
        "NODE-01",
        "held",
        "DEAD 4.0 s after the kill",
        (held.measured[0],),
    )
    assert held.held and held.measured[0].band == (0.0, 9.0) and held.measured[0].start == 10.0
    assert held.measured[0].end == 14.0  # the window closes at the moment measured


def test_a_failed_claim_keeps_what_it_measured_and_names_its_finding() -> None:
    late = dead_within(25.0, 10.0, 9.0)
    assert (late.outcome, late.held) == ("failed", False)
    assert late.reason == "DEAD 15.0 s after the kill, bound 9.0 s"
    assert [m.value for m in late.measured] == [15.0]  # the window reaches the report
    error = late.error()
    assert isinstance(error, WindowTooLong) and str(error).startswith("NODE-01: DEAD 15.0 s")
    early = dead_within(9.0, 10.0, 9.0)
    assert type(early.error()) is CheckFailed


def test_a_record_that_cannot_decide_is_unknown_never_held() -> None:
    unknown = dead_within(None, 10.0, 9.0)
    assert (unknown.outcome, unknown.measured) == ("unknown", ())
    error = unknown.error()
    assert isinstance(error, MissingEvidence)
    assert "NODE-01 cannot be judged: the node's DEAD was never observed" in str(error)


def test_a_verdict_function_lets_its_own_bugs_through() -> None:
    """Only require/unknown end a verdict: a KeyError in it is the harness's, not Ray's."""

    @verdict("NODE-01")
    def broken(j: Judging, seen: dict[str, float]) -> str:
        return str(seen["missing"])

    with pytest.raises(KeyError):
        broken({})


def test_a_helpers_check_failure_or_missing_evidence_is_the_verdict() -> None:
    """Pure helpers of chaos.check raise CheckFailed or FaultNotObserved: the verdict says so."""

    @verdict("NODE-01")
    def by_helper(j: Judging, error: Exception) -> str:
        j.measure("before the helper", 1)
        raise error

    failed = by_helper(CheckFailed("unexpected death_cause 'x'"))
    assert (failed.outcome, failed.finding, len(failed.measured)) == ("failed", None, 1)
    found = by_helper(WindowTooLong("DEAD late"))
    assert found.finding is WindowTooLong
    unknown = by_helper(FaultNotObserved("no verified strike"))
    assert unknown.outcome == "unknown"
