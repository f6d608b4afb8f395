"""NET-01 and NET-02 as pure verdicts: a worker cut off by iptables DROP, as the run recorded it.

The record: seconds from the cut until the GCS marked the worker DEAD (its own end time, else
when the observer saw it); for the task running there (``workloads.network``), the node each
attempt reported from, the State API's attempts ``(attempt number, state, node id)``, whether
the workload still waited and where the task completed; after the heal, the states the
observer saw the old node id in and the node ids ALIVE in the State API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Band, Finding, Judging, verdict


class PartitionedTaskNotRetried(Finding):
    """NET-01's finding: the only attempt is still RUNNING on the cut-off node, now DEAD, and no
    attempt has started anywhere else."""

    claims: ClassVar[tuple[str, ...]] = ("NET-01",)


@verdict("NET-01")
def dead_in_band(j: Judging, window: float | None, band: Band) -> str:
    """A worker whose health checks fail behind the cut is DEAD within the health-check band
    (``window``: cut → DEAD, None when the observer never saw it DEAD)."""
    j.measure("partition → node DEAD (s)", window)
    j.measure("health-check band", str(band))
    dead = j.found(window, f"the cut-off node was never seen DEAD, band {band}")
    j.require(dead in band, f"{dead} s outside {band}")
    return f"DEAD {dead:.2f} s after the cut, within {band}"


@dataclass(frozen=True)
class CutTask:
    """NET-01's task on the cut-off worker, as the run stood when it was recorded."""

    #: The cut-off worker's node id.
    victim: str
    #: Seconds from the cut to this record.
    since_cut: float
    #: Whether the workload still waited for the task.
    waiting: bool
    #: The node each attempt the task reported ran on, in order.
    started_on: Sequence[str | None]
    #: The State API's attempts: (attempt number, state, node id), sorted.
    attempts: Sequence[tuple[Any, Any, Any]]
    #: Where the task completed; None while it has not.
    completed_on: str | None = None


@verdict("NET-01")
def failed_over(j: Judging, task: CutTask) -> str:
    """Once the cut-off worker is DEAD its running task is retried on another node and
    completes there. Not completed: the finding :class:`PartitionedTaskNotRetried` when the
    cluster shows it (the workload still waiting, one attempt only, from the cut-off node,
    still RUNNING there in the State API); anything else cannot decide (the wait's own error
    stands)."""
    if task.completed_on is None:
        stuck = (
            task.waiting
            and list(task.started_on) == [task.victim]
            and [tuple(a) for a in task.attempts] == [(0, "RUNNING", task.victim)]
        )
        if not stuck:
            j.unknown(
                f"no completion {task.since_cut:.0f} s after the cut, and not the finding: "
                f"waiting {task.waiting}, attempts from {list(task.started_on)}, State API "
                f"{list(task.attempts)}"
            )
        j.fail(
            f"{task.since_cut:.0f} s after the cut, the worker DEAD, the task's only attempt is "
            f"still RUNNING there (State API {list(task.attempts)}) and none started elsewhere",
            PartitionedTaskNotRetried,
        )
    j.require(task.completed_on != task.victim, "the task must complete on another node")
    return f"retried off the cut-off worker and completed on {task.completed_on}"


@verdict("NET-02")
def stays_dead_after_heal(
    j: Judging, victim: str, states: Sequence[str | None], alive: frozenset[str]
) -> str:
    """Healed after it was DEAD, the worker does not come back under its old id: the observer
    saw it DEAD and never ALIVE after (``states``, oldest first, from the cut on: ALIVE before
    DEAD is detection time), and the State API does not list it ALIVE (``alive``)."""
    # The experiment's stays_dead has already ended the run on a comeback or an observer gap;
    # judged again on the states it returned, so the verdict stands on its own record.
    seen = list(states)
    j.require("DEAD" in seen, f"the observer never saw {victim[:8]} DEAD: {seen}")
    j.require("ALIVE" not in seen[seen.index("DEAD") :], f"{victim[:8]} went {seen}")
    j.require(victim not in alive, "the old node id must not be ALIVE after the heal")
    return "the old id stayed DEAD through the heal (observer) and is not ALIVE in the State API"
