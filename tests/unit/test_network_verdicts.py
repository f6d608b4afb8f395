"""NET-01 and NET-02's verdicts on what a partition's run records (no Docker): a task left
RUNNING on the cut-off worker is the finding, a record that is not the finding's cannot
decide, a comeback of the old id fails."""

from __future__ import annotations

from dataclasses import replace

from chaos.testing import Band, CheckFailed, MissingEvidence
from experiments.verdicts.network import (
    CutTask,
    PartitionedTaskNotRetried,
    dead_in_band,
    failed_over,
    stays_dead_after_heal,
)

#: FAST_HEALTH_CHECKS' band (docs/evidence/network.md: [2 s, 18 s]).
BAND = Band(2.0, 18.0, "FAST_HEALTH_CHECKS")
# The 3 December runs (docs/evidence/network.md): the cut-off worker DEAD 11.7 s after the cut;
# with the keepalive shortened, attempt #0 FAILED there and #1 FINISHED on the other worker.
RETRIED = CutTask(
    victim="w1",
    since_cut=35.2,
    waiting=False,
    started_on=["w1", "w2"],
    attempts=[(0, "FAILED", "w1"), (1, "FINISHED", "w2")],
    completed_on="w2",
)
# With Ray's default keepalive: 72 s after the cut the only attempt still RUNNING there.
STUCK = CutTask(
    victim="w1",
    since_cut=72.4,
    waiting=True,
    started_on=["w1"],
    attempts=[(0, "RUNNING", "w1")],
)


def test_net01_dead_in_the_band_holds_and_outside_it_or_never_fails() -> None:
    held = dead_in_band(11.7, BAND)
    assert (held.claim, held.outcome) == ("NET-01", "held")
    assert [m.name for m in held.measured] == ["partition → node DEAD (s)", "health-check band"]
    late = dead_in_band(19.3, BAND)
    assert late.outcome == "failed"
    assert "19.3 s outside [2.0 s, 18.0 s]" in late.reason
    never = dead_in_band(None, BAND)
    assert never.outcome == "failed"
    assert "never seen DEAD" in never.reason
    assert never.measured[0].value is None  # the window reaches the report as seen


def test_net01_a_task_retried_off_the_cut_off_worker_holds() -> None:
    held = failed_over(RETRIED)
    assert (held.claim, held.outcome) == ("NET-01", "held")
    assert "completed on w2" in held.reason
    there = failed_over(replace(RETRIED, completed_on="w1"))
    assert there.outcome == "failed"
    assert type(there.error()) is CheckFailed
    assert "complete on another node" in there.reason


def test_net01_the_task_left_running_on_the_dead_worker_is_the_finding() -> None:
    stuck = failed_over(STUCK)
    assert stuck.outcome == "failed"
    assert isinstance(stuck.error(), PartitionedTaskNotRetried)
    assert "72 s after the cut" in stuck.reason
    assert "still RUNNING there" in stuck.reason


def test_net01_an_unfinished_run_that_is_not_the_finding_cannot_decide() -> None:
    for record in (
        replace(STUCK, waiting=False),  # the workload ended: its own error stands
        replace(STUCK, started_on=["w1", "w2"]),  # an attempt started elsewhere
        replace(STUCK, attempts=[(0, "FAILED", "w1"), (1, "PENDING_NODE_ASSIGNMENT", None)]),
    ):
        verdict = failed_over(record)
        assert verdict.outcome == "unknown", record
        assert verdict.finding is None
        assert isinstance(verdict.error(), MissingEvidence)
        assert "not the finding" in verdict.reason


def test_net02_the_old_id_stays_dead_after_the_heal() -> None:
    alive = frozenset({"head", "w2"})
    held = stays_dead_after_heal("w1", ["ALIVE", "DEAD"], alive)
    assert (held.claim, held.outcome) == ("NET-02", "held")
    comeback = stays_dead_after_heal("w1", ["ALIVE", "DEAD", "ALIVE"], alive)
    assert comeback.outcome == "failed"
    assert "went ['ALIVE', 'DEAD', 'ALIVE']" in comeback.reason
    listed = stays_dead_after_heal("w1", ["DEAD"], alive | {"w1"})
    assert "must not be ALIVE after the heal" in listed.reason
    unseen = stays_dead_after_heal("w1", ["ALIVE"], alive)
    assert "never saw w1 DEAD" in unseen.reason
