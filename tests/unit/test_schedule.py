"""The fault schedule: a value computed from a seed, the same for the same seed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chaos.errors import SpecError
from chaos.spec.schedule import Role, Schedule, StrikeKind

KINDS = ("kill_node", "kill_raylet", "kill_worker", "preempt")


def build(seed: int, **overrides: object) -> Schedule:
    options: dict[str, object] = {
        "kinds": KINDS,
        "duration_s": 300,
        "interval_s": 20,
        "hold_s": (5.0, 10.0),
        "max_concurrent": 2,
    }
    options.update(overrides)
    return Schedule.build(seed, **options)  # type: ignore[arg-type]


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert build(42) == build(42)
    assert build(42).as_dict() == build(42).as_dict()


def test_another_seed_gives_another_schedule() -> None:
    one, other = build(42), build(43)
    assert [(s.at_s, s.kind, s.pick) for s in one.strikes] != [
        (s.at_s, s.kind, s.pick) for s in other.strikes
    ]


def test_one_strike_at_a_random_point_of_every_interval() -> None:
    schedule = build(7, max_concurrent=15)
    assert len(schedule.strikes) == 15  # 300 s / 20 s, none left out at this concurrency
    for number, strike in enumerate(schedule.strikes):
        assert number * 20 <= strike.at_s <= (number + 1) * 20
        assert 5.0 <= strike.hold_s <= 10.0
    assert [s.index for s in schedule.strikes] == list(range(15))


def test_strikes_beyond_the_concurrency_bound_are_left_out_of_the_schedule() -> None:
    # Holds of 30-40 s with a strike every 10 s: one at a time leaves gaps.
    schedule = build(3, interval_s=10, hold_s=(30.0, 40.0), max_concurrent=1)
    for before, after in zip(schedule.strikes, schedule.strikes[1:], strict=False):
        assert after.at_s >= before.ends_s
    assert len(schedule.strikes) < 30


def test_every_kind_is_drawn_and_only_those_asked_for() -> None:
    schedule = build(11, duration_s=2000, max_concurrent=100)
    assert {s.kind for s in schedule.strikes} == {StrikeKind(k) for k in KINDS}
    only = build(11, kinds=["kill_raylet"])
    assert {s.kind for s in only.strikes} == {StrikeKind.KILL_RAYLET}


def test_the_head_is_never_picked_unless_asked() -> None:
    assert {s.role for s in build(5, duration_s=2000).strikes} == {Role.WORKER}
    roles = {s.role for s in build(5, duration_s=2000, max_concurrent=100, head=True).strikes}
    assert roles == {Role.WORKER, Role.HEAD}


def test_a_recorded_schedule_reads_back_equal() -> None:
    schedule = build(99)
    assert Schedule.from_dict(schedule.as_dict()) == schedule


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            {"kinds": ["kill_everything"]},
            "kinds: expected strike kinds among .*, got 'kill_everything'",
        ),
        ({"kinds": []}, "at least one strike kind"),
        ({"interval_s": 0}, r"interval_s: expected 0 < interval_s <= duration_s"),
        ({"interval_s": 400}, r"interval_s: expected 0 < interval_s <= duration_s"),
        ({"hold_s": (10.0, 5.0)}, r"hold_s: expected \(low, high\) with 0 <= low <= high"),
        ({"max_concurrent": 0}, "at least 1"),
    ],
)
def test_bad_options_are_one_clear_error(overrides: dict[str, object], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        build(1, **overrides)


def test_covered_kinds_strike_once_each_and_change_nothing_else() -> None:
    plain = build(11, duration_s=100, interval_s=25, max_concurrent=1)
    covered = build(11, duration_s=100, interval_s=25, max_concurrent=1, cover=["rpc_failure"])
    assert [s.kind for s in covered.strikes].count(StrikeKind.RPC_FAILURE) == 1
    changed = [
        (a.index, a.kind, b.kind)
        for a, b in zip(plain.strikes, covered.strikes, strict=True)
        if a != b
    ]
    assert len(changed) == 1 and changed[0][2] is StrikeKind.RPC_FAILURE
    assert [(s.at_s, s.pick, s.hold_s) for s in plain.strikes] == [
        (s.at_s, s.pick, s.hold_s) for s in covered.strikes
    ]
    assert covered == build(
        11, duration_s=100, interval_s=25, max_concurrent=1, cover=["rpc_failure"]
    )


def test_covering_more_kinds_than_strikes_is_one_clear_error() -> None:
    with pytest.raises(SpecError, match="cover"):
        build(1, duration_s=40, interval_s=20, max_concurrent=1, cover=list(KINDS))


def test_every_schedule_of_the_churn_experiment_builds_and_kills_a_node() -> None:
    # CHURN-01/02/09/10 cover a node kill: every lane has work on every worker, so that strike
    # reaches each (a schedule with fewer strikes than covered kinds would not build).
    # Its constants, read from its source (importing it would need the experiments' plugin).
    path = Path(__file__).resolve().parents[2] / "experiments" / "test_churn.py"
    churn = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id
        in ("CHURN_S", "LONG_CHURN_S", "STRIKE_EVERY_S", "HOLD_S", "KINDS", "COVER")
    }
    for duration_s in (churn["CHURN_S"], churn["LONG_CHURN_S"]):
        for seed in range(1000):
            schedule = Schedule.build(
                seed,
                kinds=churn["KINDS"],
                duration_s=duration_s,
                interval_s=churn["STRIKE_EVERY_S"],
                hold_s=churn["HOLD_S"],
                max_concurrent=1,
                cover=churn["COVER"],
            )
            kinds = [s.kind for s in schedule.strikes]
            assert StrikeKind.KILL_NODE in kinds and StrikeKind.RPC_FAILURE in kinds, seed
