"""A team's own workload under the nightly killer: :func:`under_killer`.

The steady-churn experiment (CHURN-01/02/09/10) in a form a team can point at its own job: the
team's ``module:function`` runs in the cluster (a workload package its ini ships) while a
seeded :class:`~chaos.spec.schedule.Schedule` strikes; the strikes are the nemesis' own, each
proven and recorded, and the run's seed (the ``raychaos_seed`` fixture) replays the same
schedule. The workload is told to stop with ``cluster.signal("stop")`` once the schedule has
run out (``raychaos_agent.wait_signal("stop")``, or it may simply finish), and its result comes
back for the team's own verdict; the experiment fixture adds ours on leaving (no unexpected
death, resources back: INV-01/02).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.errors import FaultNotObserved
from chaos.nemesis.churn import Churn, Struck
from chaos.spec.schedule import Schedule, StrikeKind

if TYPE_CHECKING:
    from chaos.experiment.kit import Experiment

#: Seconds a replaced node may take to boot again after a strike that took it out: the
#: schedule's join waits for the schedule plus this per strike (a boot under load took up to
#: 62 s in CI, AUTOSCALE-06's evidence; twice that).
REPLACE_S = 120.0


@dataclass(frozen=True)
class KillerRun:
    """What a workload under the killer returned, and what the killer did."""

    schedule: Schedule
    struck: tuple[Struck, ...]
    #: The workload's return value (``run.result()``).
    result: Any
    #: When the schedule started and when it had run out (wall clock).
    started_at: float
    ended_at: float

    @property
    def landed(self) -> tuple[Struck, ...]:
        """The strikes that struck (the others were skipped, with the reason recorded)."""
        return tuple(s for s in self.struck if not s.skipped)


def under_killer(
    experiment: Experiment,
    target: str,
    seed: int,
    *,
    kinds: Iterable[StrikeKind | str],
    duration_s: float,
    interval_s: float,
    hold_s: tuple[float, float] = (5.0, 10.0),
    max_concurrent: int = 1,
    ready: str = "",
    timeout: float = 600.0,
    **kwargs: Any,
) -> KillerRun:
    """Run ``target`` (``module:function``, called with ``kwargs``) under a schedule of
    ``kinds`` built from ``seed``; return its result and the strikes.

    ``ready``: an event the workload emits once its work is under way (the schedule starts
    then; default: at once). Raises :class:`FaultNotObserved` when no strike landed — the
    run proved nothing about the workload under faults — and the workload's own error when
    it failed. Measured: the schedule and each strike, under "killer …" names."""
    schedule = Schedule.build(
        seed,
        kinds=kinds,
        duration_s=duration_s,
        interval_s=interval_s,
        hold_s=hold_s,
        max_concurrent=max_concurrent,
    )
    experiment.measure("killer schedule", schedule.as_dict())
    cluster = experiment.cluster
    run = cluster.run(target, timeout=timeout, **kwargs)
    if ready:
        run.wait_for(ready, timeout=min(timeout, 300.0))
    with Churn(experiment.nemesis, schedule) as churn:
        struck = churn.join(timeout=duration_s + len(schedule.strikes) * REPLACE_S)
    ended = time.time()
    cluster.signal("stop")
    result = run.result(timeout=timeout)
    experiment.measure(
        "killer strikes", [s.__dict__ | {"strike": s.strike.__dict__} for s in struck]
    )
    done = KillerRun(schedule, tuple(struck), result, churn.started_at, ended)
    if not done.landed:
        raise FaultNotObserved(
            f"no strike of seed {seed}'s schedule landed ({len(struck)} skipped): the run "
            "proved nothing about the workload under faults",
            hint="a longer duration_s, a shorter interval_s or more workers give the killer room",
        )
    return done
