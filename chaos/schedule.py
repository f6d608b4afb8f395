"""Seeded random chaos: a bounded schedule of faults generated from one seed.

The same seed (and the same inputs) always yields the same schedule; the seed is printed and
recorded in the history, so a failing night can be replayed exactly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

#: Faults a schedule may draw, each acting on one target node.
FAULTS = ("kill_node", "kill_raylet", "pause_node", "partition", "degrade")


@dataclass(frozen=True)
class Step:
    at_s: float
    fault: str
    target: str
    duration_s: float


@dataclass(frozen=True)
class Schedule:
    seed: int
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        lines = [f"chaos schedule (seed {self.seed}):"]
        lines += [
            f"  t+{s.at_s:5.1f} s  {s.fault:<12} {s.target:<12} for {s.duration_s:.1f} s"
            for s in self.steps
        ]
        return "\n".join(lines)


def generate(
    seed: int,
    targets: Sequence[str],
    *,
    faults: Sequence[str] = FAULTS,
    count: int = 5,
    horizon_s: float = 60.0,
    max_duration_s: float = 10.0,
) -> Schedule:
    """``count`` faults on ``targets`` within ``horizon_s``, none overlapping."""
    if not targets or not faults or count < 1:
        raise ValueError("a schedule needs targets, faults and count ≥ 1")
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
    rng = random.Random(seed)  # noqa: S311 - reproducible chaos, not cryptography
    slot = horizon_s / count
    steps = []
    for index in range(count):
        duration = round(rng.uniform(1.0, min(max_duration_s, slot * 0.8)), 1)
        start = round(index * slot + rng.uniform(0, slot - duration), 1)
        steps.append(Step(start, rng.choice(list(faults)), rng.choice(list(targets)), duration))
    return Schedule(seed, tuple(steps))
