"""The bands Ray's knobs imply: when a dead node must be declared DEAD, at the earliest and latest.

An experiment holds a measured window (see :mod:`chaos.check.windows`) against the band
derived from the knobs its cluster runs with, never against a guessed constant: a band that
follows the knobs stays right when an experiment shortens them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Ray's defaults (``src/ray/common/ray_config_def.h`` of 2.59/2.60), used where the cluster
#: sets no ``RAY_<name>``.
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

    Ray's ``GcsHealthCheckManager`` (``src/ray/gcs/gcs_health_check_manager.cc``): a
    node's first check waits ``health_check_initial_delay_ms`` from its registration; each
    check is one gRPC ``Check`` with a deadline of ``health_check_timeout_ms``; when it
    returns, failed or not, the next starts ``health_check_period_ms`` later (a check is also
    put off while the node reported itself healthy within the last period,
    ``MarkNodeHealthy``); ``health_check_failure_threshold`` failures in a row call
    ``FailNode``, which marks the node DEAD.

    Fastest: the check under way when the node dies fails at once, and so does each of the
    (threshold-1) checks after it, one period apart: (threshold-1) periods. The initial delay
    only puts the first check later. Measured against it: 2.2 s at the least over the 181
    kill → DEAD windows the workloads timed with ``ray.nodes()`` in ``docs/evidence/data``,
    all with period 1 s and threshold 3 (floor 2 s; 5 December 2026).

    Slowest: a node that dies just after registering waits out the initial delay; then each
    check starts up to a period after the last and waits out its timeout: delay + threshold ×
    (period + timeout); plus the observer's slack.
    """
    delay = health_check_knob(knobs, "health_check_initial_delay_ms") / 1000
    period = health_check_knob(knobs, "health_check_period_ms") / 1000
    timeout = health_check_knob(knobs, "health_check_timeout_ms") / 1000
    threshold = health_check_knob(knobs, "health_check_failure_threshold")
    low = max(0.0, (threshold - 1) * period)
    high = delay + threshold * (period + timeout) + OBSERVER_SLACK_S
    why = f"period {period:g} s, timeout {timeout:g} s, threshold {threshold}"
    return Band(low, high, why + (f", initial delay {delay:g} s" if delay else ""))
