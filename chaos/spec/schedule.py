"""A fault schedule as a value: what strikes, when, and which role it picks, from one seed.

Ray's nightly chaos tests run a killer that strikes a random worker at a random point of every
interval while a workload runs; Jepsen draws its faults from a seeded generator whose schedule
is part of the history. A :class:`Schedule` is that generator's output, computed before the
cluster exists: the same seed and options give the same strikes (kinds, order, offsets, role,
the pick among the role's candidates, hold times), another seed gives others. Which container
a pick lands on is resolved at strike time (:mod:`chaos.nemesis.churn`) from the candidates
then healthy, sorted by name, so it depends on the schedule and the cluster's shape only.

Ray's own timing is not deterministic (a kill lands wherever the workload happens to be); the
schedule is.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from chaos.errors import SpecError


class StrikeKind(StrEnum):
    """What a strike does to the node it picks. Every kind is an existing nemesis fault."""

    #: The container is killed (SIGKILL): the node is gone, and replaced after the hold.
    KILL_NODE = "kill_node"
    #: The node's raylet is killed; the container stays, and is replaced after the hold.
    KILL_RAYLET = "kill_raylet"
    #: One Ray worker process on the node (a ``ray::`` task or actor process) is killed.
    KILL_WORKER = "kill_worker"
    #: A spot preemption: a drain with reason PREEMPTION and a deadline, then the node dies
    #: at the deadline, and is replaced after the hold.
    PREEMPT = "preempt"
    #: The container is frozen (SIGSTOP via the cgroup freezer) for the hold, then thawed.
    PAUSE = "pause"
    #: The node is cut off from every other node (iptables, both ways, established
    #: connections too) for the hold; then reconnected and, since the GCS may have declared it
    #: dead meanwhile, restarted as a new node.
    PARTITION = "partition"
    #: Ray's RPC failure injection: a driver on the drivers' node whose own first pushes of
    #: tasks fail (lost requests or replies) runs a few retried tasks, while the schedule
    #: goes on around it (``chaos.nemesis.churn``). No node is taken; the role is ignored.
    RPC_FAILURE = "rpc_failure"


#: Kinds that take a node out of the cluster until the harness replaces it.
TAKES_NODE: frozenset[StrikeKind] = frozenset(
    {
        StrikeKind.KILL_NODE,
        StrikeKind.KILL_RAYLET,
        StrikeKind.PREEMPT,
        StrikeKind.PAUSE,
        StrikeKind.PARTITION,
    }
)


class Role(StrEnum):
    """Which nodes a strike may pick, by their role in Ray (resolved at strike time)."""

    WORKER = "worker"
    HEAD = "head"


@dataclass(frozen=True)
class Strike:
    """One scheduled fault: ``at_s`` after the schedule starts, on ``role``'s ``pick``-th
    candidate (modulo how many there are then), held ``hold_s`` before it is healed."""

    index: int
    at_s: float
    kind: StrikeKind
    role: Role
    pick: int
    hold_s: float

    @property
    def ends_s(self) -> float:
        return self.at_s + self.hold_s


@dataclass(frozen=True)
class Schedule:
    """Strikes in the order they fire, built by :meth:`build` from ``seed``."""

    seed: int
    duration_s: float
    max_concurrent: int
    strikes: tuple[Strike, ...]

    @classmethod
    def build(
        cls,
        seed: int,
        *,
        kinds: Iterable[StrikeKind | str],
        duration_s: float,
        interval_s: float,
        hold_s: tuple[float, float] = (5.0, 10.0),
        max_concurrent: int = 1,
        head: bool = False,
        cover: Iterable[StrikeKind | str] = (),
    ) -> Schedule:
        """One strike at a uniformly random point of every ``interval_s`` of ``duration_s``,
        its kind drawn from ``kinds``, held for a time drawn from ``hold_s``. A strike that
        would exceed ``max_concurrent`` faults at once (counting the holds scheduled before it)
        is left out of the schedule, so what it says is what runs. ``head=True`` lets strikes
        pick the head too (one in five); by default they never do.

        ``cover``: kinds that must each strike once (a short run would otherwise leave some
        out by chance): they replace the drawn kind of as many strikes, chosen by the seed.
        Without it, the draws are exactly those of a schedule built without the option."""
        chosen = _kinds(kinds)
        covered = _kinds(cover) if cover else []
        if duration_s <= 0 or interval_s <= 0 or interval_s > duration_s:
            raise SpecError(
                "interval_s",
                f"0 < interval_s <= duration_s (duration_s={duration_s})",
                interval_s,
                hint="e.g. duration_s=120, interval_s=20: six strikes",
            )
        low, high = hold_s
        if not 0 <= low <= high:
            raise SpecError("hold_s", "(low, high) with 0 <= low <= high", hold_s)
        if max_concurrent < 1:
            raise SpecError("max_concurrent", "at least 1", max_concurrent)
        rng = random.Random(seed)  # noqa: S311 — a replayable schedule, not a secret
        strikes: list[Strike] = []
        start = 0.0
        while start + interval_s <= duration_s + 1e-9:
            at = round(start + rng.uniform(0, interval_s), 3)
            kind = rng.choice(chosen)
            role = Role.HEAD if head and rng.random() < 0.2 else Role.WORKER
            pick = rng.randrange(1 << 16)
            hold = round(rng.uniform(low, high), 3)
            start += interval_s
            active = sum(1 for s in strikes if s.ends_s > at)
            if active >= max_concurrent:
                continue
            strikes.append(Strike(len(strikes), at, kind, role, pick, hold))
        if len(covered) > len(strikes):
            raise SpecError(
                "cover",
                f"at most as many kinds as the schedule has strikes ({len(strikes)})",
                [k.value for k in covered],
                hint="a longer duration_s or a shorter interval_s gives more strikes",
            )
        for index, kind in zip(rng.sample(range(len(strikes)), len(covered)), covered, strict=True):
            strikes[index] = replace(strikes[index], kind=kind)
        return cls(seed, float(duration_s), max_concurrent, tuple(strikes))

    def as_dict(self) -> dict[str, Any]:
        """The schedule as the history and the Allure result record it."""
        return {
            "seed": self.seed,
            "duration_s": self.duration_s,
            "max_concurrent": self.max_concurrent,
            "strikes": [asdict(s) for s in self.strikes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schedule:
        """Read back :meth:`as_dict` (a recorded night's schedule)."""
        strikes = tuple(
            Strike(
                int(s["index"]),
                float(s["at_s"]),
                StrikeKind(s["kind"]),
                Role(s["role"]),
                int(s["pick"]),
                float(s["hold_s"]),
            )
            for s in data["strikes"]
        )
        return cls(
            int(data["seed"]), float(data["duration_s"]), int(data["max_concurrent"]), strikes
        )


def _kinds(kinds: Iterable[StrikeKind | str]) -> list[StrikeKind]:
    chosen: list[StrikeKind] = []
    for kind in kinds:
        try:
            chosen.append(StrikeKind(kind))
        except ValueError:
            known = ", ".join(k.value for k in StrikeKind)
            raise SpecError("kinds", f"strike kinds among {known}", kind) from None
    if not chosen:
        raise SpecError("kinds", "at least one strike kind", [], hint="e.g. kinds=['kill_node']")
    return chosen
