"""SCHED-01 … SCHED-05 as pure verdicts over what ``workloads.scheduling`` reported.

The records: each placement's per-node counts keyed by node name (every node, zeros
included), how many were asked for (``n``) and the CPU free once they were gone; the DEFAULT
series, one placement per ``n``; the head-only resource runs (the resource and its total,
where the first and second waves landed, how many waited, the actors' states, ``ray
status``'s Pending Demands lines) and the serial tasks' counts, duration and states; the
NodeAffinity outcomes (``ok``, the error's type and message, or the node that ran it) per
kind and ``soft``; and ``ray status`` of a 0-CPU head's cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chaos.testing import Judging, verdict

Seen = Mapping[str, Any]


def worker_counts(counts: Mapping[str, int]) -> list[int]:
    """The workers' counts, sorted: which worker fills first varies from run to run."""
    return sorted(v for k, v in counts.items() if k.startswith("worker"))


def unbalanced(result: Seen, nodes: Sequence[str]) -> str | None:
    """Why a SPREAD placement is not balanced over ``nodes`` (the alive CPU nodes), or None:
    every one counted, all ``n`` placed, counts within one of each other."""
    counts = result["counts"]
    if not set(nodes) <= set(counts):
        return f"every alive CPU node is counted: {counts}"
    if sum(counts.values()) != result["n"]:
        return f"{result['n']} placed expected: {counts}"
    placed = [counts[n] for n in nodes]
    if max(placed) - min(placed) > 1:
        return f"SPREAD must balance within 1: {counts}"
    return None


@verdict("SCHED-01")
def spread_evenly(
    j: Judging, placements: Mapping[str, Seen], nodes: Sequence[str], cpus: float
) -> str:
    """SPREAD places actors and tasks evenly over the alive nodes (counts within one), and
    every CPU of the cluster's ``cpus`` is free again once they are gone. ``placements``:
    each ``place`` result by label."""
    for label, result in placements.items():
        problem = unbalanced(result, nodes)
        j.require(problem is None, f"{label}: {problem}")
        free = result["cpu_after"]
        j.require(
            free["available"] == free["total"] == cpus,
            f"{label}: all {cpus} CPUs free afterwards: {free}",
        )
    seen = "; ".join(f"{label} {r['counts']}" for label, r in placements.items())
    return f"balanced within 1: {seen}"


@verdict("SCHED-02")
def hybrid_policy(
    j: Judging, series: Sequence[Seen], expected: Mapping[int, tuple[int, list[int]]]
) -> str:
    """DEFAULT, from a driver on the head, fills the head to the spread threshold (0.5 of its
    4 CPUs), then spreads: each placement's head count and sorted worker counts are
    ``expected[n]`` (measured, the experiment's HYBRID)."""
    for r in series:
        head, workers = expected[r["n"]]
        placed = (r["counts"]["head"], worker_counts(r["counts"]))
        j.require(
            placed == (head, workers),
            f"n={r['n']}: hybrid policy placed {r['counts']}, expected head {head}, "
            f"workers {workers} (spread threshold 0.5 of 4 CPUs)",
        )
    return "; ".join(f"n={r['n']}: {r['counts']}" for r in series)


def _one_wave(j: Judging, label: str, only: Seen) -> None:
    """Three actors for the head's one unit: one ALIVE on the head, two PENDING_CREATION and
    in Pending Demands; the next freed unit goes to the head too."""
    j.require(only["total_in_cluster"] == 1, f"{label}: one unit in the cluster: {only}")
    j.require(only["first_wave_nodes"] == ["head"], f"{label}: the first on the head: {only}")
    j.require(only["pending_count"] == 2, f"{label}: two must wait: {only}")
    live = [s for s in only["actor_states"] if s != "DEAD"]
    j.require(
        live.count("PENDING_CREATION") == 2 and live.count("ALIVE") == 1,
        f"{label}: one ALIVE, two PENDING_CREATION: {only['actor_states']}",
    )
    key = next(iter(only["resources"]), None)
    if key is None:
        j.unknown(f"{label}: the workload did not report the resource asked for: {only}")
    j.require(
        any(f"{{'{key}': 1.0}}" in line and "pending" in line for line in only["pending_demands"]),
        f"{label}: ray status must list the waiting demand: {only['pending_demands']}",
    )
    j.require(only["second_wave_nodes"] == ["head"], f"{label}: the next one lands on the head too")


@verdict("SCHED-04")
def head_only_resource(j: Judging, waves: Mapping[str, Seen], serial: Seen) -> str:
    """Work needing a resource only the head has (a custom one, or ``node:<head ip>``) runs on
    the head, and requests beyond its one unit wait (``waves``: the actors, by label); four
    tasks needing it (``serial``) all run on the head, one at a time."""
    for label, only in waves.items():
        _one_wave(j, label, only)
    j.require(
        serial["counts"] == {"head": 4, "worker-1": 0, "worker-2": 0},
        f"the tasks all on the head: {serial}",
    )
    j.require(
        serial["seconds"] >= serial["serial_bound_s"],
        f"one unit: the tasks run one at a time: {serial}",
    )
    j.require(
        "PENDING_NODE_ASSIGNMENT" in serial["states_while_serial"],
        f"the later tasks must wait for the unit: {serial}",
    )
    return (
        f"{', '.join(waves)}: one on the head, two waiting, the next on the head; 4 tasks on "
        f"the head in {serial['seconds']} s (serial bound {serial['serial_bound_s']} s)"
    )


#: SCHED-05's errors for soft=False, by kind.
UNSCHEDULABLE = {"task": "TaskUnschedulableError", "actor": "ActorUnschedulableError"}


@verdict("SCHED-05")
def affinity_to_dead(j: Judging, cases: Mapping[str, Seen], alive: frozenset[str]) -> str:
    """NodeAffinity to a node that is dead (or never existed): with soft=False the task fails
    with TaskUnschedulableError and the actor with ActorUnschedulableError, naming the
    strategy; with soft=True both run on a live node (``alive``)."""
    for label, case in cases.items():
        for kind, error in UNSCHEDULABLE.items():
            hard = case[f"{kind}_soft=False"]
            j.require(
                not hard["ok"] and hard["error"]["type"] == error,
                f"{label}: {kind} soft=False must fail with {error}: {hard}",
            )
            j.require(
                "NodeAffinitySchedulingStrategy" in hard["error"]["message"],
                f"{label}: the error must name the strategy: {hard['error']['message']}",
            )
            soft = case[f"{kind}_soft=True"]
            j.require(
                soft["ok"] and soft["node"] in alive,
                f"{label}: {kind} soft=True must run on {sorted(alive)}: {soft}",
            )
    return f"{', '.join(cases)}: soft=False unschedulable, soft=True ran on a live node"


@verdict("SCHED-03")
def zero_cpu_head(j: Judging, placements: Mapping[str, Seen], status: str, cpus: float) -> str:
    """A head started with ``--num-cpus=0`` gets no CPU actor or task, whatever the strategy,
    and adds no CPU: ``ray status`` shows the workers' ``cpus`` only."""
    for label, r in placements.items():
        j.require(r["counts"]["head"] == 0, f"{label} landed on the 0-CPU head: {r}")
        j.require(sum(r["counts"].values()) == r["n"], f"{label}: {r['n']} placed: {r}")
    j.require(f"/{cpus:.1f} CPU" in status, f"the head adds no CPU to the cluster: {status}")
    return f"the head got none of {', '.join(placements)}; ray status: {cpus:.1f} CPU"
