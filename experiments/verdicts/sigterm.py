"""CHURN-08 as a pure verdict: two blocking ``ray start`` processes (a pod's PID 1) stopped
with SIGTERM, as ``workloads.preemption:sigterm`` and the strikes recorded it.

The record: for each node (``quiet``: a task that outlasts the signal; ``busy``: an actor
call that never ends), when its SIGTERM was sent, whether the GCS was seen listing it as
draining and the drain's deadline it listed; the workload's result: the nodes' ids, the
task's and the actor call's outcomes, both nodes' ``ray.nodes()`` records and State API rows
(with the GCS's end time), and the task's executions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos.testing import SIGTERM_MESSAGE, Judging, verdict

from .churn import AUTOSCALER_DRAIN_PREEMPTED

#: The busy node is DEAD in the GCS within this after the knob's timeout, counted from the
#: host's exec of the signal: the exec's own delay on a loaded host, then the raylet's
#: unregistering (0.3 s seen for a SIGTERMed raylet in CHURN-04). 15.04-15.48 s seen in all.
UNREGISTER_S = 5.0

Seen = Mapping[str, Any]


@dataclass(frozen=True)
class Terminated:
    """One node's SIGTERM: when it was sent, whether the GCS was then seen listing the node as
    draining, and the drain's deadline it listed (s since the epoch; None: not listed)."""

    injected_at: float
    seen_draining: bool
    drain_deadline: float | None = None


def _ended(j: Judging, seen: Seen, name: str, struck: Terminated) -> float:
    """Seconds from the node's SIGTERM to its end in the GCS (the State API's end time)."""
    rows = (seen.get("states") or {}).get(name) or []
    end_ms = (rows[0] if rows else {}).get("end_time_ms")
    if not end_ms:
        j.unknown(f"the State API has no end time for the {name} node: {rows}")
    return round(float(end_ms) / 1000 - struck.injected_at, 2)


def _quiet(j: Judging, seen: Seen, quiet: Terminated, ended: float, drain_timeout_s: float) -> None:
    """The quiet node's running task finished there, then the node ended once idle, before
    the timeout, and its death is the drain's (a preemption, with Ray's SIGTERM message)."""
    task = seen["task"]
    j.require(task["error"] is None, f"a running task survives its node's drain: {task['error']}")
    value = task["value"]
    j.require(
        value["node_id"] == seen["ids"]["quiet"] and value["execution"] == 1,
        f"the task must run once, on the quiet node: {value}",
    )
    j.require(value["t"] > quiet.injected_at, "set-up: the task must end after the SIGTERM")
    # (Its end after the task is proven by the task's value: max_retries=0, on that node.)
    j.measure(
        "CHURN-08 quiet: task end → DEAD (s, the GCS keeps whole ms)",
        round(quiet.injected_at + ended - value["t"], 3),
    )
    j.require(
        ended < drain_timeout_s,
        f"an idle draining node ends before the {drain_timeout_s:g} s timeout: {ended} s",
    )
    record = seen["records"]["quiet"] or {}
    j.require(record.get("Alive") is False, f"the quiet node must be dead: {record}")
    j.require(
        record.get("DeathReason") == AUTOSCALER_DRAIN_PREEMPTED,
        f"the GCS must record the quiet node's death as its preemption drain "
        f"({AUTOSCALER_DRAIN_PREEMPTED}): {record}",
    )
    j.require(
        record.get("DeathReasonMessage") == SIGTERM_MESSAGE,
        f"the drain's message must be Ray's '{SIGTERM_MESSAGE}': {record}",
    )
    states = [s.get("state_message") for s in seen["states"]["quiet"]]
    j.require(
        states == [f"Terminated due to preemption: {SIGTERM_MESSAGE}"],
        f"the State API's row of the quiet node: {states}",
    )


@verdict("CHURN-08")
def drains_before_it_ends(
    j: Judging, seen: Seen, quiet: Terminated, busy: Terminated, drain_timeout_s: float
) -> str:
    """SIGTERM to a blocking ``ray start`` drains its node before anything ends (the GCS lists
    both as draining): the quiet node's running task returns from it and the node ends once
    idle, before ``drain_timeout_s`` (RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S), recorded as the
    preemption drain; the busy node ends at the timeout, its actor with it. How the busy
    node's death is recorded is a race inside Ray (the experiment's docstring): measured, not
    judged."""
    j.require(
        quiet.seen_draining and busy.seen_draining,
        "a SIGTERMed blocking ray start drains its node: the GCS must list both as draining",
    )
    ended = {"quiet": _ended(j, seen, "quiet", quiet), "busy": _ended(j, seen, "busy", busy)}
    j.measure("CHURN-08 SIGTERM → DEAD in the GCS (s)", ended)
    _quiet(j, seen, quiet, ended["quiet"], drain_timeout_s)

    # The busy node: never idle, so it ended at the timeout, and its actor with it.
    j.measure("CHURN-08 busy: the drain's deadline as the GCS listed it", busy.drain_deadline)
    j.require(
        drain_timeout_s <= ended["busy"] <= drain_timeout_s + UNREGISTER_S,
        f"a busy draining node ends at the {drain_timeout_s:g} s timeout: {ended}",
    )
    busy_record = seen["records"]["busy"] or {}
    j.require(busy_record.get("Alive") is False, f"the busy node must be dead: {busy_record}")
    error = seen["call"]["error"]
    j.require(
        error is not None and error["type"] == "ActorDiedError",
        f"the busy node's actor call must end in ActorDiedError: {seen['call']}",
    )
    # Whether the GCS recorded a preemption is a race inside Ray: measured, not judged.
    j.measure(
        "CHURN-08 busy: death recorded as",
        {
            "DeathReason": busy_record.get("DeathReason"),
            "DeathReasonMessage": busy_record.get("DeathReasonMessage"),
            "actor error preempted": error.get("preempted"),
        },
    )
    return (
        f"both drained; the quiet node's task returned and the node ended {ended['quiet']} s "
        f"after its SIGTERM as a preemption drain; the busy node ended at {ended['busy']} s, "
        "its actor with it"
    )
