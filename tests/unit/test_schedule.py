"""Seeded schedules are reproducible and bounded."""

from __future__ import annotations

import pytest

from chaos.schedule import FAULTS, generate


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    targets = ["worker-1", "worker-2"]
    assert generate(7, targets) == generate(7, targets)
    assert generate(7, targets) != generate(8, targets)


def test_schedule_is_bounded_and_steps_do_not_overlap() -> None:
    schedule = generate(1234, ["worker-1", "worker-2", "head"], count=8, horizon_s=80)
    assert len(schedule.steps) == 8
    for step, following in zip(schedule.steps, schedule.steps[1:], strict=False):
        assert step.at_s + step.duration_s <= following.at_s + 1e-9
    assert all(s.at_s >= 0 and s.at_s + s.duration_s <= 80 for s in schedule.steps)
    assert {s.fault for s in schedule.steps} <= set(FAULTS)
    assert "seed 1234" in str(schedule)


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown faults"):
        generate(1, ["w"], faults=["explode"])
    with pytest.raises(ValueError, match="targets"):
        generate(1, [])
