"""SERVE-08's verdict on what a hung health check's run records (no Docker)."""

from __future__ import annotations

from dataclasses import replace

from experiments.verdicts.serve_health import HungChecks, hang_band, hung_check_times_out

T0 = 1_796_600_000.0
BAND = hang_band(3, 1.0, 2.0, 1.1)


def line(t: float, **fields: object) -> dict[str, object]:
    return {"t": T0 + t, "line": f"… Replica(id='abc') … at {t}", **fields}


SEEN = HungChecks(
    hung_at=T0,
    checks=[(T0 - 1.0, "ok"), (T0 + 0.3, "hang"), (T0 + 2.4, "hang"), (T0 + 4.5, "hang")],
    timeouts=[line(2.4, after_s=2.0), line(4.5, after_s=2.0), line(6.6, after_s=2.0)],
    verdicts=[line(6.6, in_a_row=3)],
    answered_while_hung=12,
    replaced=True,
    new_alive=T0 + 9.0,
)


def judge(seen: HungChecks = SEEN) -> object:
    return hung_check_times_out(seen, 3, 2.0, BAND)


def test_the_band_is_three_timeouts_after_at_most_one_jittered_period() -> None:
    assert BAND == (5.9, 8.6)


def test_three_hung_checks_timed_out_in_turn_replace_the_replica() -> None:
    held = hung_check_times_out(SEEN, 3, 2.0, BAND)
    assert held.held and held.claim == "SERVE-08", held.reason
    measured = {m.name: m for m in held.measured}
    assert measured["SERVE-08 hang → marked unhealthy (s)"].value == 6.6
    assert measured["SERVE-08 hang → marked unhealthy (s)"].band == BAND
    assert measured["SERVE-08 between the timeouts (s)"].value == [2.1, 2.1]


def test_a_late_verdict_or_checks_in_parallel_or_a_returned_check_fail() -> None:
    late = replace(SEEN, verdicts=[line(9.5, in_a_row=3)], timeouts=[
        line(5.3, after_s=2.0), line(7.4, after_s=2.0), line(9.5, after_s=2.0)
    ])  # fmt: skip
    failed = hung_check_times_out(late, 3, 2.0, BAND)
    assert failed.outcome == "failed" and "outside (5.9, 8.6)" in failed.reason
    parallel = replace(
        SEEN, timeouts=[line(2.4, after_s=2.0), line(3.0, after_s=2.0), line(6.6, after_s=2.0)]
    )
    assert "one check in flight at a time" in hung_check_times_out(parallel, 3, 2.0, BAND).reason
    returned = replace(SEEN, checks=[*SEEN.checks, (T0 + 5.0, "ok")])
    assert "a check returned after the hang" in hung_check_times_out(returned, 3, 2.0, BAND).reason
    other = replace(SEEN, timeouts=[line(2.4, after_s=30.0), *SEEN.timeouts[1:]])
    assert "timed out after 2.0 s" in hung_check_times_out(other, 3, 2.0, BAND).reason
    four = replace(SEEN, checks=[*SEEN.checks, (T0 + 6.0, "hang")])
    assert "4 hung checks before the verdict" in hung_check_times_out(four, 3, 2.0, BAND).reason
    one_more = replace(SEEN, checks=[*SEEN.checks, (T0 + 6.7, "hang")])
    assert hung_check_times_out(one_more, 3, 2.0, BAND).held
    twice = replace(SEEN, verdicts=[line(6.6, in_a_row=2)])
    assert "the threshold is 3" in hung_check_times_out(twice, 3, 2.0, BAND).reason


def test_a_replica_never_replaced_fails_and_a_replacement_without_its_record_cannot_decide() -> (
    None
):
    kept = hung_check_times_out(replace(SEEN, replaced=False, verdicts=[]), 3, 2.0, BAND)
    assert kept.outcome == "failed" and "never replaced" in kept.reason
    unlogged = hung_check_times_out(replace(SEEN, verdicts=[]), 3, 2.0, BAND)
    assert unlogged.outcome == "unknown" and "no 'failed the health check' line" in unlogged.reason
    unseen = hung_check_times_out(replace(SEEN, new_alive=None), 3, 2.0, BAND)
    assert unseen.outcome == "unknown" and "replacement replica ALIVE" in unseen.reason
