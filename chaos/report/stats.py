"""Repeated trials, summarised: passes out of N with a Wilson interval, windows as spreads.

A test's trials are its results of one ``historyId`` (:mod:`chaos.plugin.trials`: a trial is an
excluded Allure parameter), the latest result per trial number (a rerun of a trial replaces
it). Without ``--raychaos-trials`` a test has one trial, its latest result, exactly what
:func:`chaos.report.model.fold_retries` keeps.

Why Wilson: with 3 trials the normal approximation gives 3/3 an interval of width zero; the
Wilson score interval (Wilson 1927) stays inside [0, 1], contains the observed rate and is
honest for small N (3/3 → 0.44–1.00 at 95 %).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from chaos.report.coverage import (
    FAILED,
    FINDING,
    PASSED,
    VERDICT_ORDER,
    XPASS,
    verdict_for,
    verdict_of,
    worst,
)
from chaos.report.model import MEASUREMENTS, TestResult, every_trial
from chaos.report.trials import untrial

#: The standard normal quantile of a two-sided 95 % interval.
Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (95 % by default)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"expected 0 ≤ successes ≤ n and n ≥ 1, got {successes}/{n}")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # The formula gives exactly 0 and 1 at the ends; rounding must not move them past p.
    low = 0.0 if successes == 0 else max(0.0, min(p, centre - half))
    high = 1.0 if successes == n else min(1.0, max(p, centre + half))
    return low, high


@dataclass(frozen=True)
class Proportion:
    """``successes`` out of ``n`` trials, with its 95 % Wilson interval."""

    successes: int
    n: int

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.n)

    @property
    def all(self) -> bool:
        return self.successes == self.n

    def __str__(self) -> str:
        low, high = self.interval
        return f"{self.successes}/{self.n} (95 % CI {low:.2f}–{high:.2f})"


def beyond_noise(base: Proportion, candidate: Proportion) -> bool:
    """Did the pass rate drop beyond trial noise? Base N/N and the candidate below its N,
    or the candidate's interval wholly below the base's."""
    if base.n < 1 or candidate.n < 1:
        return False
    if base.all:
        return not candidate.all
    return candidate.interval[1] < base.interval[0]


@dataclass(frozen=True)
class Spread:
    """Values of one measurement over trials: median and range."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def overlaps(self, other: Spread) -> bool:
        return not (other.high < self.low or other.low > self.high)

    def __str__(self) -> str:
        if len(self.values) == 1:
            return f"{self.values[0]:g}"
        return f"{self.median:g} ({self.low:g}–{self.high:g}, {len(self.values)} trials)"


#: With a single trial on a side there is no noise to measure, so a window moved only when the
#: medians differ by this factor *and* this much (seconds, for a window). Why so wide: one
#: release's windows vary that much between suite runs — in docs/evidence/data (three runs of
#: 2.60.0) node-death windows spread ×6 (2.4–15.5 s, the health check's phase) and OBJ-01's
#: reconstructed read 7.2–26.6 s; no spread there passes both bounds, TASK-05's retry going
#: from 60.8 s to 3.8 s does.
MOVE_RATIO = 2.0
MOVE_FLOOR = 20.0
BEYOND_NOISE = "beyond trial noise"
BEYOND_TOLERANCE = "beyond tolerance"


def moved(base: Spread, candidate: Spread, *, seconds: bool = True) -> str:
    """Why a window moved from ``base`` to ``candidate`` ("" when it did not).

    Two trials or more on both sides: when the ranges do not overlap (beyond trial noise).
    Else, for a window in seconds only (the tolerance is stated in seconds; a byte or object
    count has no such scale): when the medians differ by :data:`MOVE_RATIO` and
    :data:`MOVE_FLOOR`.
    """
    if len(base.values) >= 2 and len(candidate.values) >= 2:
        return "" if base.overlaps(candidate) else BEYOND_NOISE
    if not seconds:
        return ""
    b, c = base.median, candidate.median
    if abs(c - b) < MOVE_FLOOR:
        return ""
    low, high = sorted((abs(b), abs(c)))
    if (b < 0) != (c < 0) or low == 0 or high >= MOVE_RATIO * low:
        return BEYOND_TOLERANCE
    return ""


def numbers(value: object) -> list[float]:
    """The numbers a measurement holds: a number, a list of them, or ``{"value": number}``."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)] if math.isfinite(value) else []
    if isinstance(value, list):
        return [n for v in value for n in numbers(v) if not isinstance(v, list | dict)]
    if isinstance(value, Mapping) and "value" in value:
        return numbers(value["value"])
    return []


def measurements(test: TestResult, blobs: Mapping[str, bytes]) -> dict[str, object]:
    """The ``measurements`` attachment(s) of one result, merged."""
    found: dict[str, object] = {}
    for attachment in test.attachments:
        if attachment.name == MEASUREMENTS and attachment.source in blobs:
            try:
                data = json.loads(blobs[attachment.source])
            except ValueError:
                continue
            if isinstance(data, dict):
                found.update({str(k): v for k, v in data.items()})
    return found


def latest_per_trial(runs: Iterable[TestResult]) -> list[TestResult]:
    """One result per (historyId, trial): the latest (a rerun replaces its trial)."""
    return every_trial(runs)


@dataclass(frozen=True)
class TrialGroup:
    """The trials of one test on one release (one historyId), in trial order."""

    runs: tuple[TestResult, ...]

    @property
    def latest(self) -> TestResult:
        return max(self.runs, key=lambda t: (t.stop, t.start))

    @property
    def name(self) -> str:
        """The test's name without the trial: ``test_x[2.60.0]``."""
        return untrial(self.latest.name)

    @property
    def verdicts(self) -> list[str]:
        return [verdict_of(t) for t in self.runs]

    @property
    def verdict(self) -> str:
        """The worst verdict of any trial (what the claims matrix shows)."""
        return worst(self.verdicts)

    @property
    def expected(self) -> str:
        """What a good trial is: a recorded finding for a strict-xfail test, else a pass."""
        return FINDING if {FINDING, XPASS} & set(self.verdicts) else PASSED

    @property
    def outcome(self) -> Proportion:
        """Good trials out of all."""
        return Proportion(sum(1 for v in self.verdicts if v == self.expected), len(self.runs))

    @property
    def passes(self) -> Proportion:
        """Passed trials out of the judged ones (passed, failed or broken): what a regression
        is counted in."""
        judged = [v for v in self.verdicts if v not in (FINDING, XPASS, "skipped")]
        return Proportion(sum(1 for v in judged if v == PASSED), len(judged))

    def held(self, claim: str) -> Proportion:
        """Trials in which ``claim`` held, out of those that judged it, by each trial's
        verdict on that claim (:func:`chaos.report.coverage.verdict_for`, not the test's):
        passed (or, for the claim a strict finding is about, its test passed: the finding no
        longer reproduces) out of those, plus the trials that failed it or raised a finding
        about it. A broken, skipped or not-judged trial decided nothing about the claim; a
        finding about another claim leaves it held only where the body recorded it held."""
        verdicts = [verdict_for(claim, t) for t in self.runs]
        judged = [v for v in verdicts if v in (PASSED, XPASS, FINDING, FAILED)]
        return Proportion(sum(1 for v in judged if v in (PASSED, XPASS)), len(judged))

    @property
    def shown(self) -> str:
        """``passed 3/3 (95 % CI 0.44–1.00)``, with the other verdicts when mixed."""
        others = {v: self.verdicts.count(v) for v in VERDICT_ORDER if v != self.expected}
        rest = ", ".join(f"{n} {v}" for v, n in others.items() if n)
        return f"{self.expected} {self.outcome}" + (f"; {rest}" if rest else "")

    def spreads(self, blobs: Mapping[str, bytes]) -> dict[str, Spread]:
        """Every numeric measurement over the trials, in first-seen order."""
        values: dict[str, list[float]] = {}
        for run in self.runs:
            for name, value in measurements(run, blobs).items():
                found = numbers(value)
                if found:
                    values.setdefault(name, []).extend(found)
        return {name: Spread(tuple(v)) for name, v in values.items()}

    def texts(self, blobs: Mapping[str, bytes]) -> dict[str, list[str]]:
        """Measurements that are not numbers, each distinct value once."""
        found: dict[str, list[str]] = {}
        for run in self.runs:
            for name, value in measurements(run, blobs).items():
                if not numbers(value):
                    text = value if isinstance(value, str) else json.dumps(value)
                    shown = found.setdefault(name, [])
                    if text not in shown:
                        shown.append(text)
        return found


def trial_groups(runs: Iterable[TestResult]) -> list[TrialGroup]:
    """Every test's trials (:func:`latest_per_trial`), grouped by historyId."""
    grouped: dict[str, list[TestResult]] = {}
    for run in latest_per_trial(runs):
        grouped.setdefault(run.history_id, []).append(run)
    groups = [
        TrialGroup(tuple(sorted(g, key=lambda t: (t.trial or 0, t.start))))
        for g in grouped.values()
    ]
    return sorted(groups, key=lambda g: (g.latest.full_name, g.latest.ray_version, g.name))


def repeated(groups: Sequence[TrialGroup]) -> bool:
    """Whether any test ran more than once."""
    return any(len(g.runs) > 1 for g in groups)
