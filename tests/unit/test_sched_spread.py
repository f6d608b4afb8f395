"""SCHED-01's check can fail: the placement DEFAULT gives its actors is refused."""

from __future__ import annotations

import pytest

from experiments.test_scheduling import HYBRID, SPREAD_N, check_spread

NODES = ["head", "worker-1", "worker-2"]


def test_spread_accepts_a_balanced_placement() -> None:
    check_spread({"counts": {"head": 2, "worker-1": 1, "worker-2": 1}, "n": SPREAD_N}, NODES)


def test_the_default_policys_placement_of_as_many_actors_is_refused() -> None:
    head, (low, high) = HYBRID[SPREAD_N]  # measured DEFAULT placement: head 2, workers 0 and 2
    default = {"head": head, "worker-1": low, "worker-2": high}
    with pytest.raises(AssertionError, match="SPREAD must balance within 1"):
        check_spread({"counts": default, "n": SPREAD_N}, NODES)
