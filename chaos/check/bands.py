"""The bands Ray's knobs imply: when a dead node must be declared DEAD, at the earliest and latest.

An experiment holds a measured window (see :mod:`chaos.check.windows`) against the band
derived from the knobs its cluster runs with, never against a guessed constant: a band that
follows the knobs stays right when an experiment shortens them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Ray's defaults (read off the 2.59/2.60 sources; CLAIMS.md, "Facts every experiment…").
HEALTH_CHECK_DEFAULTS = {
    "health_check_initial_delay_ms": 5000,
    "health_check_period_ms": 3000,
    "health_check_timeout_ms": 10000,
    "health_check_failure_threshold": 5,
}
#: The observer's own lag: State API staleness (~1 s) plus a sampling period on an idle host;
#: up to 5.5 s was measured with four clusters booting on two cores, hence 6 s.
OBSERVER_SLACK_S = 6.0


@dataclass(frozen=True)
class Band:
    """A closed interval of seconds, with the knobs that set it (printed in failures)."""

    low: float
    high: float
    why: str

    def __contains__(self, seconds: float) -> bool:
        return self.low <= seconds <= self.high

    def __str__(self) -> str:
        return f"[{self.low:.1f} s, {self.high:.1f} s] ({self.why})"


def health_check_knob(knobs: Mapping[str, str], name: str) -> int:
    """The health-check knob ``name`` in effect: ``RAY_<name>`` if set, else Ray's default."""
    return int(knobs.get(f"RAY_{name}", HEALTH_CHECK_DEFAULTS[name]))


def node_death_band(knobs: Mapping[str, str]) -> Band:
    """When the GCS marks a dead node DEAD: ``threshold`` failed checks, one per period.

    Fastest: the checks already under way fail at once, (threshold-1) periods. Slowest: every
    check waits out its timeout; plus the observer's slack.
    """
    period = health_check_knob(knobs, "health_check_period_ms") / 1000
    timeout = health_check_knob(knobs, "health_check_timeout_ms") / 1000
    threshold = health_check_knob(knobs, "health_check_failure_threshold")
    low = max(0.0, (threshold - 1) * period - period)
    high = threshold * (period + timeout) + OBSERVER_SLACK_S
    return Band(low, high, f"period {period:g} s, timeout {timeout:g} s, threshold {threshold}")
