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
    # period 1 s, timeout 3 s, threshold 3: at least 1 period, at most 3 × (1 + 3) + slack.
    band = node_death_band(FAST_HEALTH_CHECKS)
    assert (band.low, band.high) == (1.0, 3 * 4.0 + OBSERVER_SLACK_S) == (1.0, 18.0)
    assert band.why == "period 1 s, timeout 3 s, threshold 3"


def test_ray_defaults_apply_where_no_knob_is_set() -> None:
    # period 3 s, timeout 10 s, threshold 5.
    band = node_death_band({})
    assert (band.low, band.high) == (9.0, 5 * 13.0 + OBSERVER_SLACK_S) == (9.0, 71.0)


def test_one_knob_moves_the_band_and_the_others_keep_their_defaults() -> None:
    band = node_death_band({"RAY_health_check_period_ms": "500"})
    assert (band.low, band.high) == (1.5, 5 * 10.5 + OBSERVER_SLACK_S)
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
