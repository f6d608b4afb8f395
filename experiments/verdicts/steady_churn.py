"""CHURN-01, CHURN-02, CHURN-09, CHURN-10 as pure verdicts: steady work under a seeded killer,
one lane per claim, as ``workloads.churn:steady`` and the ``rpc_failure`` strikes' drivers
recorded it.

The record (:class:`SteadyRun`): the steady workload's result — per lane what was sent, what
came back, the wrong values, the errors of a lane that gave up, how often each numbered actor
call ran, and what the strikes did to each lane by Ray's own records (the State API's task
attempts, the actors' restarts, the rebuilds); how many container strikes landed; and what
each ``rpc_failure`` strike's driver returned. A lane's claim holds when everything it sent came
back exact *and* a strike reached it; a lane no strike reached is undecided (unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import RPC_PROBE, Judging, Verdict, verdict

#: The steady workload's lanes (``workloads.churn:steady``), each judged exactly, and the
#: claim each lane's verdict is.
LANES = ("tasks", "actor calls", "generator items", "borrowed objects")
CLAIM_OF = dict(zip(LANES, ("CHURN-01", "CHURN-02", "CHURN-09", "CHURN-10"), strict=True))
#: A retry whose failed attempt Ray's memory monitor killed is no strike's doing.
NOT_STRUCK = ("OUT_OF_MEMORY",)


@dataclass(frozen=True)
class SteadyRun:
    """One run of the steady workload under a seeded schedule of strikes."""

    #: The schedule's seed (it alone replays the strikes).
    seed: int
    #: ``workloads.churn:steady``'s result: ``sent``, ``completed`` and ``wrong`` per lane,
    #: ``errors`` (each naming its lane), ``executed`` (each numbered call's runs) and ``hits``.
    seen: Mapping[str, Any]
    #: Container strikes that landed (not skipped); the ``rpc_failure`` strike is none.
    landed: int
    #: Per ``rpc_failure`` strike, its driver's outcome: ``tag``, ``calls``, ``values``,
    #: ``injected`` (the push failures Ray logged) and ``error`` (None unless it gave up).
    probes: Sequence[Mapping[str, Any]] = ()


def _struck_retries(attempts: Mapping[str, Any]) -> int:
    """Re-executions (``workloads.lanes.attempts``: retries by the failed attempt's error,
    and rebuilds) that a strike could cause."""
    causes = attempts.get("causes") or {}
    return sum(int(n) for cause, n in causes.items() if cause not in NOT_STRUCK)


def reached(run: SteadyRun) -> dict[str, int]:
    """Per lane, what the strikes did to it as Ray recorded it: nested tasks retried, actor
    restarts, streaming generators re-executed, lent objects rebuilt from lineage."""
    hits = run.seen["hits"]
    return {
        "tasks": _struck_retries(hits["tasks"]["parents"])
        + _struck_retries(hits["tasks"]["children"]),
        "actor calls": sum(int(a.get("num_restarts") or 0) for a in hits["actor calls"]["actors"]),
        "generator items": _struck_retries(hits["generator items"]["generators"]),
        "borrowed objects": int(hits["borrowed objects"]["makers"]["rebuilt"]),
    }


def proofs(run: SteadyRun) -> dict[str, str]:
    """Per lane, in words, the proof that a strike reached it (``CHURN lanes hit``)."""
    hit = reached(run)
    return {
        "tasks": f"{run.landed} container strikes landed, {hit['tasks']} nested tasks retried",
        "actor calls": f"the actors restarted {hit['actor calls']} times",
        "generator items": f"{hit['generator items']} streaming generators re-executed",
        "borrowed objects": f"{hit['borrowed objects']} lent objects rebuilt from lineage",
    }


def lane_problems(seen: Mapping[str, Any], lane: str) -> list[str]:
    """How ``lane``'s outcome departs from the exact one: it gave up, a value came back
    wrong, an item never came back; for the actor calls, a call not logged as executed."""
    problems = [f"gave up: {e}" for e in seen["errors"] if e.get("lane") == lane]
    if seen["wrong"][lane]:
        problems.append(f"wrong values: {seen['wrong'][lane][:20]}")
    if seen["completed"][lane] != seen["sent"][lane]:
        problems.append(f"{seen['completed'][lane]} of {seen['sent'][lane]} came back")
    if lane == "actor calls" and len(seen["executed"]) != seen["completed"][lane]:
        problems.append(
            f"every numbered call runs at least once: {len(seen['executed'])} of "
            f"{seen['completed'][lane]} logged"
        )
    return problems


def probe_problems(probes: Iterable[Mapping[str, Any]]) -> list[str]:
    """How each ``rpc_failure`` driver departs from CHURN-01's outcome: its tasks returned
    their own values, and Ray logged every push failure it injected."""
    problems = []
    for probe in probes:
        tag, calls = probe["tag"], probe["calls"]
        if probe["error"] is not None:
            problems.append(f"{tag}: the driver whose pushes failed gave up: {probe}")
        elif probe["values"] != [f"{tag}:{i}" for i in range(calls)]:
            problems.append(f"{tag}: wrong values: {probe}")
        elif probe["injected"] != RPC_PROBE.num_failures:
            problems.append(
                f"{tag}: Ray must log {RPC_PROBE.num_failures} injected push failures: {probe}"
            )
    return problems


def _lane(j: Judging, run: SteadyRun, lane: str, problems: list[str]) -> str:
    """The lane's outcome exact (no ``problems``), then the lane hit by a strike."""
    j.require(not problems, f"{lane}: " + "; ".join(problems))
    hit, proof = reached(run)[lane], proofs(run)[lane]
    if lane == "tasks" and not run.landed:
        hit = 0  # only the rpc_failure strike landed: no container fault at all
    if hit <= 0:
        j.unknown(
            f"no strike of seed {run.seed}'s schedule reached the {lane} ({proof}); see the "
            "strikes and 'CHURN what the strikes did to each lane' in the evidence"
        )
    return f"every {lane[:-1] if lane.endswith('s') else lane} came back exact; {proof}"


@verdict("CHURN-01")
def tasks_exact(j: Judging, run: SteadyRun) -> str:
    """Every nested retried task returns exactly its own value, none missing, and so does
    every ``rpc_failure`` driver's (Ray logging both injected push failures); once a nested
    task was retried after a container strike."""
    return _lane(j, run, "tasks", lane_problems(run.seen, "tasks") + probe_problems(run.probes))


@verdict("CHURN-02")
def actor_calls_exact(j: Judging, run: SteadyRun) -> str:
    """Every numbered call to the restartable actors returns its own number and was logged as
    executed at least once (at-least-once: a call run twice is counted, never lost); once an
    actor restarted."""
    return _lane(j, run, "actor calls", lane_problems(run.seen, "actor calls"))


@verdict("CHURN-09")
def generator_items_exact(j: Judging, run: SteadyRun) -> str:
    """Every streaming generator's item comes back once, in order, its index and bytes exact;
    once a generator was re-executed."""
    return _lane(j, run, "generator items", lane_problems(run.seen, "generator items"))


@verdict("CHURN-10")
def borrowed_objects_exact(j: Judging, run: SteadyRun) -> str:
    """Every borrower returns the bytes of the object it was lent; once a lent object was
    rebuilt from lineage."""
    return _lane(j, run, "borrowed objects", lane_problems(run.seen, "borrowed objects"))


#: The four lanes' verdicts, in LANES' order.
JUDGES = (tasks_exact, actor_calls_exact, generator_items_exact, borrowed_objects_exact)


def held_first(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The order to judge the lanes in: a claim that held is recorded before another lane's
    verdict can end the test, and a lane that failed ends it before one no strike reached."""
    rank = {"held": 0, "failed": 1, "unknown": 2}
    return sorted(verdicts, key=lambda v: rank[v.outcome])
