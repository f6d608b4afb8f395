"""AUTOSCALE-01 … AUTOSCALE-09 as pure verdicts over what the harness recorded of Ray's
autoscaler and what ``workloads.autoscale`` reported.

The record: the harness's own rows of the provider it bridges (``autoscaler_launched``:
``t``, ``node``, ``node_id``, ``node_type``; ``autoscaler_removed``; ``autoscaler_refused``;
each agreed wish as ``[seconds since the first wish, {type: count}]``), as the history's
events give them (``Event.to_json()``); each task's outcome (``{"value": {"node",
"node_type", "start", "end"}, "error"}``); what ``ray status`` listed (its Pending Demands
lines, its Pending and Recent failures sections) and the fields the workload emitted around
it; the autoscaler's own log lines; the node's State API row; and the times of the demand,
the strikes and the releases, passed in (no clock here).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Judging, verdict

Row = Mapping[str, Any]

#: AUTOSCALE-07: the line ``ray status`` prints under Pending Demands for one pending
#: STRICT_SPREAD group of two ``{"CPU": 1}`` bundles, as Ray 2.60.0 writes it:
#: ``autoscaler/_private/util.py`` ``get_demand_report`` (" {pg}: {count}+ pending placement
#: groups") and ``format_pg`` ("{bundle} * {count}" per distinct bundle, then " ({strategy})"),
#: from ``load_metrics.py`` ``summary`` (bundles counted by ``freq_of_dicts``; a bundle's
#: ``unit_resources`` are doubles, hence ``1.0``). Stripped, as ``pending_demands`` returns it.
PENDING_GROUP_LINE = "{'CPU': 1.0} * 2 (STRICT_SPREAD): 1+ pending placement groups"
#: The header of the report ``ray status`` shows: ``Autoscaler status: <date> <time>`` in
#: the head's local time (UTC in the harness's containers).
REPORT_HEADER = re.compile(r"Autoscaler status: (\S+ \S+) =")


@dataclass(frozen=True)
class Demand:
    """AUTOSCALE-01's run: when the demand was submitted, the launches (oldest first), the
    tasks' outcomes and the harness's refusals."""

    submitted: float
    launched: Sequence[Row]
    outcomes: Sequence[Row]
    refused: Sequence[Row]


@verdict("AUTOSCALE-01")
def demand_fits_its_type(j: Judging, run: Demand, launch_s: float) -> str:
    """Pending demand for ``tagged`` launches ``tagged`` nodes only (never ``plain``), the
    tasks run on them, and the autoscaler asks for nothing beyond the caps. ``launch_s``: the
    band of demand → first launch (the experiment's wait already bounds it)."""
    j.require(bool(run.launched), "no node was launched for the demand")
    first = run.launched[0]
    j.measure(
        "AUTOSCALE-01 demand to launch (s)",
        round(first["t"] - run.submitted, 2),
        band=(0.0, launch_s),
        start=run.submitted,
    )
    launched = {e.get("node"): e.get("node_type") for e in run.launched}
    j.measure("AUTOSCALE-01 launched", launched)
    j.measure("AUTOSCALE-01 ran on", [o["value"] for o in run.outcomes])
    j.require(set(launched.values()) == {"tagged"}, f"only tagged nodes fit: {launched}")
    for outcome in run.outcomes:
        j.require(outcome["error"] is None, f"a task failed: {outcome}")
        j.require(outcome["value"]["node"] in launched, f"ran off the launched nodes: {outcome}")
        j.require(outcome["value"]["node_type"] == "tagged", f"ran on a non-tagged node: {outcome}")
    j.require(not run.refused, f"the autoscaler asked beyond the caps: {list(run.refused)}")
    return (
        f"tagged nodes only ({sorted(map(str, launched))}), the first "
        f"{first['t'] - run.submitted:.2f} s after the demand; {len(run.outcomes)} tasks ran on them"
    )


@dataclass(frozen=True)
class Capped:
    """AUTOSCALE-02's run: the provider's wishes over time (``[s, {type: count}]``), the
    ``pending_demands`` event's fields (``lines``, ``status``), how many nodes the harness
    launched, its refusals and the tasks' outcomes."""

    over_time: Sequence[Sequence[Any]]
    pending: Row
    launched: int
    refused: Sequence[Row]
    outcomes: Sequence[Row]


@verdict("AUTOSCALE-02")
def caps_hold(j: Judging, run: Capped, caps: Mapping[str, int], total: int) -> str:
    """No wish exceeds a type's ``max_workers`` (``caps``) or the cluster's (``total``), the
    demand fills the cluster's cap, the harness refuses nothing, ``ray status`` lists the rest
    as pending demand, and every task runs."""
    j.measure("AUTOSCALE-02 workers over time (s, by type)", run.over_time)
    j.measure("AUTOSCALE-02 pending demands", run.pending.get("lines"))
    j.require(run.launched > 0, "the demand launched nothing: no cap was put to the test")
    if not run.over_time:
        j.unknown("nodes were launched, yet no wish of the provider was recorded")
    for at, counts in run.over_time:
        for node_type, cap in caps.items():
            j.require(
                counts.get(node_type, 0) <= cap,
                f"{at} s: type {node_type} over its max_workers {cap}: {counts}",
            )
        j.require(
            sum(counts.values()) <= total,
            f"{at} s: over the cluster's max_workers {total}: {counts}",
        )
    peak = max(sum(c.values()) for _, c in run.over_time)
    j.require(
        peak == total,
        f"the demand should fill the cluster's cap ({total} workers): peak {peak}",
    )
    j.require(not run.refused, f"the autoscaler asked beyond the caps: {list(run.refused)}")
    j.require(
        bool(run.pending.get("lines")),
        f"ray status showed no pending demand: {run.pending.get('status')}",
    )
    for outcome in run.outcomes:
        j.require(outcome["error"] is None, f"a task failed: {outcome}")
    return (
        f"peak {peak} workers wanted, no cap exceeded, nothing refused; ray status listed "
        f"{len(run.pending['lines'])} pending demands; all {len(run.outcomes)} tasks ran"
    )


@dataclass(frozen=True)
class Infeasible:
    """AUTOSCALE-03's run: the feasible task's outcome, the ``infeasible_watched`` event's
    fields (``pending``, ``lines``, ``watched_s``, ``status``), the types launched and the
    autoscaler's log lines naming a request no type can satisfy."""

    feasible: Row
    watched: Row
    launched: Sequence[str]
    log: str


@verdict("AUTOSCALE-03")
def infeasible_reported(j: Judging, run: Infeasible, num_cpus: int) -> str:
    """A ``num_cpus`` task no type can hold launches nothing (the feasible 1-CPU task's one
    ``plain`` node only), stays pending, and is reported both by ``ray status`` and by the
    autoscaler's log."""
    request = f"'CPU': {float(num_cpus)}"
    watched = run.watched
    j.measure("AUTOSCALE-03 launched", list(run.launched))
    j.measure("AUTOSCALE-03 pending demands", watched.get("lines"))
    j.measure("AUTOSCALE-03 watched (s)", watched.get("watched_s"))
    j.measure("AUTOSCALE-03 autoscaler log", run.log.strip().splitlines()[-1:])
    j.require(
        run.feasible.get("error") is None,
        f"the feasible task must run (the autoscaler works): {run.feasible}",
    )
    j.require(
        list(run.launched) == ["plain"], f"exactly one node, for the 1-CPU task: {run.launched}"
    )
    j.require(bool(watched.get("pending")), f"the {num_cpus}-CPU task must still be pending")
    j.require(
        any(request in line for line in watched.get("lines") or []),
        f"ray status must list {{{request}}} as pending demand: {watched.get('status')}",
    )
    j.require(
        "{" + request + "}" in run.log,
        f"the autoscaler's log names no infeasible request: {run.log!r}",
    )
    return (
        f"one plain node, for the 1-CPU task; the {num_cpus}-CPU task still pending after "
        f"{watched.get('watched_s')} s, listed by ray status and the autoscaler's log"
    )


@verdict("AUTOSCALE-04")
def idle_node_removed(
    j: Judging,
    ended: float,
    removed_at: float,
    window: tuple[float, float],
    state: Row,
    message: str,
) -> str:
    """A node whose last task ended at ``ended`` is removed no sooner than the idle timeout
    and within a few rounds after (``window``, seconds after ``ended``), and the State API
    records it DEAD with the autoscaler's ``message``."""
    low, high = window
    idle_for = removed_at - ended
    j.measure("AUTOSCALE-04 task end to removal (s)", round(idle_for, 2), band=window, start=ended)
    # Judged on the unrounded value, as measured against the window.
    j.require(
        low <= idle_for <= high,
        f"removed {idle_for:.1f} s after its last task; expected within [{low:.0f}, "
        f"{high:.0f}] s (the idle timeout, then up to five rounds and 10 s)",
    )
    j.measure("AUTOSCALE-04 death message", state.get("state_message"))
    j.require(
        message in str(state.get("state_message")),
        f"the State API must record the node terminated as idle ({message!r}): {dict(state)}",
    )
    return f"removed {idle_for:.2f} s after its last task; DEAD: {state.get('state_message')}"


@verdict("AUTOSCALE-05")
def min_workers_replaced(
    j: Judging, launched: Sequence[Row], killed_at: float, bound: float, node_type: str
) -> str:
    """The ``min_workers`` node's host killed at ``killed_at``: exactly one replacement of
    the same ``node_type``, a new Ray node id, launched within ``bound`` seconds (the
    provider's cleanup interval, then the launch's rounds)."""
    j.require(len(launched) >= 2, f"no replacement was launched: {list(launched)}")
    first, second = launched[0], launched[1]
    replaced = second["t"] - killed_at
    j.measure(
        "AUTOSCALE-05 kill to replacement launch (s)",
        round(replaced, 2),
        band=(0.0, bound),
        start=killed_at,
    )
    j.require(
        second.get("node_type") == node_type,
        f"the replacement must be a {node_type} node: {dict(second)}",
    )
    j.require(
        second.get("node_id") != first.get("node_id"),
        f"the replacement must be a new Ray node: {second.get('node_id')}",
    )
    j.require(
        replaced <= bound,
        f"replaced {replaced:.1f} s after the kill; expected within {bound:.1f} s (the "
        "provider's cleanup interval, then the launch's rounds)",
    )
    j.require(len(launched) == 2, f"one replacement, no more: {[e.get('node') for e in launched]}")
    return f"{second.get('node')} (a new node id) launched {replaced:.2f} s after the kill"


@verdict("AUTOSCALE-06")
def request_holds_until_released(
    j: Judging, asked: float, released: float, last_removed: float, bound: float
) -> str:
    """``request_resources()`` held its nodes from ``asked`` to ``released`` (the hold
    itself is judged as it happens, by the experiment); once released, the last of them is
    removed as idle within ``bound`` seconds."""
    after = last_removed - released
    j.measure(
        "AUTOSCALE-06 release to last removal (s)",
        round(after, 2),
        band=(0.0, bound),
        start=released,
    )
    j.measure("AUTOSCALE-06 held (s)", round(released - asked, 2))
    j.require(
        after <= bound,
        f"the last node was removed {after:.1f} s after the release; expected within "
        f"{bound:.1f} s (the idle timeout, then up to five rounds and 10 s)",
    )
    return f"held {released - asked:.1f} s; the last removed {after:.2f} s after the release"


@dataclass(frozen=True)
class PendingGroup:
    """AUTOSCALE-07's run: the fields of ``pg_created`` (``state``), ``pg_listed`` (the
    ``ray status`` that listed the group: ``lines``, ``s``, ``state_before``,
    ``state_after``) and ``pg_ready`` (``ready``, ``s``, ``bundles_to_node_id``), and the
    launched nodes (Ray node id → the harness's name)."""

    created: Row
    listed: Row
    ready: Row
    launched: Mapping[str, str]


@verdict("AUTOSCALE-07")
def pending_group_placed(j: Judging, run: PendingGroup) -> str:
    """A STRICT_SPREAD group no node can hold is PENDING, listed by ``ray status`` as a
    pending placement group while it is pending, then placed once two nodes are launched,
    one bundle on each."""
    listed, ready = run.listed, run.ready
    placed = ready.get("bundles_to_node_id") or {}
    lines = listed.get("lines") or []
    j.measure("AUTOSCALE-07 created → listed in ray status (s)", listed.get("s"))
    j.measure("AUTOSCALE-07 pending demand lines", lines)
    j.measure(
        "AUTOSCALE-07 group state around that ray status",
        [listed.get("state_before"), listed.get("state_after")],
    )
    j.measure("AUTOSCALE-07 pending to ready (s)", ready.get("s"))
    j.measure("AUTOSCALE-07 bundles on", {k: run.launched.get(v, v) for k, v in placed.items()})
    j.require(
        run.created.get("state") == "PENDING",
        f"the group must be PENDING when created: {dict(run.created)}",
    )
    # Listed while pending: the ray status that listed it was asked for while the group was
    # still PENDING (read just before the CLI ran), so its report predates the placement.
    j.require(
        listed.get("state_before") == "PENDING",
        f"no ray status listed the group before it left PENDING: {dict(listed)}",
    )
    j.require(
        PENDING_GROUP_LINE in lines,
        f"ray status must list {PENDING_GROUP_LINE!r} under Pending Demands while the group is "
        f"pending; it listed {lines}",
    )
    j.require(bool(ready.get("ready")), f"the group was not placed: {dict(ready)}")
    j.require(len(run.launched) == 2, f"two nodes for two spread bundles: {dict(run.launched)}")
    j.require(
        set(placed.values()) == set(run.launched), f"bundles off the launched nodes: {placed}"
    )
    return (
        f"PENDING and listed by ray status {listed.get('s')} s after its creation; placed "
        f"{ready.get('s')} s after it, one bundle on each of the two launched nodes"
    )


@dataclass(frozen=True)
class BrokenType:
    """AUTOSCALE-08's run: the plain task's outcome, the ``listed`` and ``watched`` events'
    fields (``pending``, ``failures``, ``status``; ``stuck`` when watched) and the broken
    node's address."""

    plain: Row
    listed: Row
    watched: Row
    ip: str


@verdict("AUTOSCALE-08")
def broken_type_reported(j: Judging, run: BrokenType, watch_s: float) -> str:
    """A node type whose ``ray start`` fails blocks no other type (the plain task runs on a
    plain node), and its node is listed in ``ray status`` as Pending, uninitialized, for as
    long as it is watched (``watch_s``), its task still waiting."""
    listed, watched = run.listed, run.watched
    j.measure("AUTOSCALE-08 pending", listed.get("pending"))
    j.measure("AUTOSCALE-08 recent failures", listed.get("failures"))
    j.measure(f"AUTOSCALE-08 after {watch_s:.0f} s", watched.get("pending"))
    j.require(run.plain.get("error") is None, f"the plain task must run: {dict(run.plain)}")
    if "value" not in run.plain:
        j.unknown(f"the plain task reported no outcome: {dict(run.plain)}")
    j.require(
        run.plain["value"]["node_type"] == "plain",
        f"the plain task must run on a plain node: {dict(run.plain)}",
    )
    expected = f"{run.ip}: broken, uninitialized"
    j.require(
        expected in (listed.get("pending") or []),
        f"ray status must list {expected!r} under Pending: {listed.get('status')}",
    )
    j.require(
        expected in (watched.get("pending") or []),
        f"{watch_s:.0f} s later, ray status must still list {expected!r}: {watched.get('status')}",
    )
    j.require(bool(watched.get("stuck")), "the broken type's task must still wait")
    return (
        f"the plain task ran on a plain node; {expected!r} listed under Pending, still "
        f"{watch_s:.0f} s later, its task waiting"
    )


def report_time(status: str) -> float | None:
    """When the report ``ray status`` shows was written (its header, the head's local time:
    UTC), as a UNIX time; None when it shows no report."""
    match = REPORT_HEADER.search(status)
    if not match:
        return None
    stamp = datetime.datetime.fromisoformat(match.group(1))
    return stamp.replace(tzinfo=datetime.UTC).timestamp()


@dataclass(frozen=True)
class AutoscalerKill:
    """AUTOSCALE-09's run: when the monitor was killed and when it was proven gone, the
    ``min_workers`` node that was there, every launch, the tasks' outcomes and the last
    ``ran`` event's time, the monitor PIDs on the head at the end, and ``ray status``."""

    killed_at: float
    gone_at: float
    node: str
    launched: Sequence[Row]
    outcomes: Sequence[Row]
    last_ran_at: float
    monitors: Sequence[int]
    status: str


@verdict("AUTOSCALE-09")
def killed_autoscaler_stays_dead(j: Judging, run: AutoscalerKill, queued_s: float) -> str:
    """A SIGKILLed autoscaler is not restarted: the demand after it queues on the node
    already there (the last of the three tasks starts ``queued_s`` or more after the first),
    no node is launched, no monitor runs on the head, and ``ray status`` shows no report
    written after the monitor was gone."""
    reported = j.found(
        report_time(run.status), f"ray status shows no autoscaler report: {run.status[:300]}"
    )
    ran = [o["value"]["node"] for o in run.outcomes if o["error"] is None]
    j.measure("AUTOSCALE-09 watched after the kill (s)", round(run.last_ran_at - run.killed_at, 1))
    j.measure("AUTOSCALE-09 ran on", ran)
    j.measure("AUTOSCALE-09 launches after the kill", len(run.launched) - 1)
    j.measure("AUTOSCALE-09 last report, s before the kill", round(run.killed_at - reported, 1))
    j.require(ran == [run.node] * 3, f"every task on the node already there: {ran}")
    # The proof that demand waited: the last task started only once two others had run.
    starts = sorted(o["value"]["start"] for o in run.outcomes)
    j.measure("AUTOSCALE-09 demand pending (s)", round(starts[-1] - starts[0], 1))
    j.require(
        starts[-1] - starts[0] >= queued_s, f"the tasks did not queue for the one node: {starts}"
    )
    j.require(len(run.launched) == 1, f"launched after the kill: {list(run.launched[1:])}")
    j.require(not run.monitors, f"an autoscaler runs again on the head: PIDs {list(run.monitors)}")
    # The kill's exec takes a moment: the last report may be written while it runs, but none
    # after the monitor was proven gone.
    j.require(
        reported <= run.gone_at,
        f"ray status shows a report from after the kill: {run.status[:200]}",
    )
    return (
        f"the three tasks queued on {run.node} ({starts[-1] - starts[0]:.1f} s), no launch, no "
        f"monitor back; ray status's last report {run.killed_at - reported:.1f} s before the kill"
    )
