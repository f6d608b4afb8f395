"""The death band follows the health-check knobs in effect, not a guessed constant."""

from __future__ import annotations

import pytest

import chaos.check
from chaos.check import (
    FAST_HEALTH_CHECKS,
    HEALTH_CHECK_DEFAULTS,
    OBSERVER_SLACK_S,
    Band,
    health_check_knob,
    node_death_band,
)


def test_fast_health_checks_give_a_band_of_seconds() -> None:
    # period 1 s, timeout 3 s, threshold 3, no initial delay: at least (3 - 1) periods, at
    # most 3 × (1 + 3) + slack.
    band = node_death_band(FAST_HEALTH_CHECKS)
    assert (band.low, band.high) == (2.0, 3 * 4.0 + OBSERVER_SLACK_S) == (2.0, 18.0)
    assert band.why == "period 1 s, timeout 3 s, threshold 3"


def test_the_floor_is_threshold_minus_one_periods_as_the_docstring_says() -> None:
    # GcsHealthCheckManager: the check under way fails at once, then one failed check per
    # period until the threshold. Not one period less (the band's old floor).
    for period_ms, threshold in ((1000, 3), (3000, 5), (500, 1), (250, 2)):
        knobs = {
            "RAY_health_check_period_ms": str(period_ms),
            "RAY_health_check_failure_threshold": str(threshold),
        }
        assert node_death_band(knobs).low == (threshold - 1) * period_ms / 1000
    # The floor measured in the evidence (2.2 s at period 1 s, threshold 3) lies in the band.
    assert 2.2 in node_death_band(FAST_HEALTH_CHECKS)
    assert 1.9 not in node_death_band(FAST_HEALTH_CHECKS)


def test_ray_defaults_apply_where_no_knob_is_set() -> None:
    # initial delay 5 s, period 3 s, timeout 10 s, threshold 5.
    band = node_death_band({})
    assert (band.low, band.high) == (12.0, 5 + 5 * 13.0 + OBSERVER_SLACK_S) == (12.0, 76.0)
    assert band.why == "period 3 s, timeout 10 s, threshold 5, initial delay 5 s"


def test_the_initial_delay_moves_only_the_ceiling() -> None:
    # A node that dies before its first check waits the delay out; the floor is unchanged.
    base = {**FAST_HEALTH_CHECKS}
    delayed = {**base, "RAY_health_check_initial_delay_ms": "4000"}
    assert node_death_band(delayed).low == node_death_band(base).low
    assert node_death_band(delayed).high == node_death_band(base).high + 4.0


def test_one_knob_moves_the_band_and_the_others_keep_their_defaults() -> None:
    band = node_death_band({"RAY_health_check_period_ms": "500"})
    assert (band.low, band.high) == (2.0, 5 + 5 * 10.5 + OBSERVER_SLACK_S)
    assert "period 0.5 s, timeout 10 s, threshold 5" in str(band)


def test_a_knob_is_read_with_its_ray_prefix_else_the_default() -> None:
    knobs = {"RAY_health_check_failure_threshold": "7", "health_check_period_ms": "1"}
    assert health_check_knob(knobs, "health_check_failure_threshold") == 7
    # Without the RAY_ prefix Ray does not see it, so neither does the band.
    assert health_check_knob(knobs, "health_check_period_ms") == 3000
    assert HEALTH_CHECK_DEFAULTS["health_check_period_ms"] == 3000


def test_a_band_is_closed_and_says_why_in_failures() -> None:
    band = Band(1.0, 12.0, "period 1 s")
    assert 1.0 in band and 12.0 in band and 5 in band
    assert 0.99 not in band and 12.01 not in band
    assert str(band) == "[1.0 s, 12.0 s] (period 1 s)"


def test_the_public_api_exports_what_it_lists() -> None:
    missing = [name for name in chaos.check.__all__ if not hasattr(chaos.check, name)]
    assert missing == []
    assert len(set(chaos.check.__all__)) == len(chaos.check.__all__)


@pytest.mark.parametrize("name", ["await_dead", "dead_in_band", "stays_dead", "strike_on"])
def test_the_helpers_experiments_use_are_public(name: str) -> None:
    assert name in chaos.check.__all__
