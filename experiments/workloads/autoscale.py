"""Autoscaling workloads (AUTOSCALE-*): demand for Ray's autoscaler, and where it ran.

Each task reports the node that ran it by the harness's name (``RAYCHAOS_NODE``, in every
process of a node) and by its node type (``RAY_NODE_TYPE_NAME``, which the harness gives each
launched node as the provider's spec asks): the experiment matches them against what the
harness launched, not against what Ray says about itself.
"""

from __future__ import annotations

import os
import time
from typing import Any

import ray
from raychaos_agent import emit, until

from workloads.scheduling import awaited_demands, pending_demands, ray_status
from workloads.tasks import connect, outcome_of


@ray.remote
def hold(seconds: float) -> dict[str, Any]:
    started = time.time()
    time.sleep(seconds)
    return {
        "node": os.environ.get("RAYCHAOS_NODE", ""),
        "node_type": os.environ.get("RAY_NODE_TYPE_NAME", ""),
        "start": started,
        "end": time.time(),
    }


def demand(
    groups: list[dict[str, Any]],
    hold_s: float,
    timeout_s: float,
    pending: str = "",
) -> dict[str, Any]:
    """Submit ``count`` tasks per group (``num_cpus``, ``resources``), each holding its slot for
    ``hold_s``; with ``pending``, wait (bounded) until ``ray status`` lists a demand containing
    it; then every task's outcome."""
    connect()
    refs = []
    for group in groups:
        options = {"num_cpus": group.get("num_cpus", 1), "resources": group.get("resources", {})}
        refs += [hold.options(**options).remote(hold_s) for _ in range(group["count"])]
    emit("submitted", tasks=len(refs))
    if pending:
        lines, status = awaited_demands(pending, timeout=timeout_s)
        emit("pending_demands", lines=lines, status=status)
    outcomes = [outcome_of(ref, timeout_s) for ref in refs]
    emit("ran", outcomes=outcomes)
    return {"outcomes": outcomes}


def infeasible(num_cpus: float, watch_s: float, timeout_s: float) -> dict[str, Any]:
    """A task no node type can hold (``num_cpus``) next to one a type can: the second runs;
    the first is still pending ``watch_s`` later and ``ray status`` lists it; then cancelled."""
    connect()
    huge = hold.options(num_cpus=num_cpus).remote(0)
    emit("submitted", tasks=2)
    small = outcome_of(hold.options(num_cpus=1).remote(0), timeout_s)
    emit("feasible_ran", outcome=small)
    lines, status = awaited_demands(f"'CPU': {float(num_cpus)}", timeout=timeout_s)
    started = time.time()
    ready, _ = ray.wait([huge], timeout=watch_s)
    still = not ready
    emit(
        "infeasible_watched",
        pending=still,
        watched_s=round(time.time() - started, 2),
        lines=lines,
        status=status,
        status_after=ray_status(),
    )
    ray.cancel(huge, force=True)
    return {"feasible": small, "pending": still}


def request(num_cpus: int) -> dict[str, Any]:
    """``ray.autoscaler.sdk.request_resources(num_cpus=…)``: persistent until the next call."""
    from ray.autoscaler.sdk import request_resources

    connect()
    request_resources(num_cpus=num_cpus)
    emit("requested", num_cpus=num_cpus)
    return {"requested": num_cpus}


def placement_group(bundles: list[dict[str, float]], strategy: str, timeout_s: float) -> Any:
    """A placement group no node of the cluster can hold yet: its state while pending, what
    ``ray status`` lists for it while it is pending, how long until it is ready, and where its
    bundles went.

    ``ray status`` is polled (bounded, once a second) until its Pending Demands name a pending
    placement group or the group has left PENDING; each snapshot is taken between two reads of
    the group's state, so the experiment can tell a listing made while the group was pending
    from one made after it was placed.
    """
    from ray.util.placement_group import placement_group as create
    from ray.util.placement_group import placement_group_table, remove_placement_group

    connect()
    group = create(bundles, strategy=strategy)
    started = time.time()
    emit("pg_created", state=placement_group_table(group).get("state"))

    def snapshot() -> dict[str, Any]:
        before = placement_group_table(group).get("state")
        status = ray_status()
        return {
            "state_before": before,
            "state_after": placement_group_table(group).get("state"),
            "lines": pending_demands(status),
            "s": round(time.time() - started, 2),
            "status": status,
        }

    def listed_or_placed(seen: dict[str, Any]) -> bool:
        named = any("pending placement group" in line for line in seen["lines"])
        return named or seen["state_after"] != "PENDING"

    emit("pg_listed", **until(snapshot, listed_or_placed, timeout_s, period=1.0))
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    table = placement_group_table(group)
    emit(
        "pg_ready",
        ready=bool(ready),
        s=round(time.time() - started, 2),
        state=table.get("state"),
        bundles_to_node_id=table.get("bundles_to_node_id"),
    )
    remove_placement_group(group)
    return {"ready": bool(ready)}


def _section(status: str, title: str) -> list[str]:
    """The lines under ``title`` in ``ray status`` (up to the next unindented line)."""
    out: list[str] = []
    grab = False
    for line in status.splitlines():
        if line.strip() == title:
            grab = True
        elif grab and line.startswith(" "):
            out.append(line.strip())
        elif grab:
            break
    return out


def broken_type(
    broken: dict[str, float], node_type: str, watch_s: float, timeout_s: float
) -> dict[str, Any]:
    """A task for ``node_type``, whose nodes never start Ray (``broken``: its resources), and
    a plain 1-CPU task: the plain one's outcome, then ``ray status``'s Pending and Recent
    failures sections once the broken node is listed, and again after ``watch_s`` (earlier if
    the listing changes)."""

    def listed(status: str) -> bool:
        return any(f": {node_type}," in line for line in _section(status, "Pending:"))

    connect()
    stuck = hold.options(num_cpus=1, resources=broken).remote(0)
    emit("submitted", tasks=2)
    plain = outcome_of(hold.options(num_cpus=1).remote(0), timeout_s)
    emit("plain_ran", outcome=plain)
    # The report lags the cluster (one autoscaler round, then the GCS): polled until it lists.
    status = until(ray_status, listed, timeout_s, period=1.0)
    first = {
        "pending": _section(status, "Pending:"),
        "failures": _section(status, "Recent failures:"),
    }
    emit("listed", **first, status=status)
    # Watched for a change: the broken node leaving Pending (failed, or joined) ends it early.
    later = until(ray_status, lambda s: not listed(s), watch_s, period=2.0)
    emit(
        "watched",
        pending=_section(later, "Pending:"),
        failures=_section(later, "Recent failures:"),
        stuck=not ray.wait([stuck], timeout=0)[0],
        status=later,
    )
    ray.cancel(stuck, force=True)
    return {"plain": plain}
