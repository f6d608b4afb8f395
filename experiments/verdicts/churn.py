"""CHURN-03, CHURN-04, CHURN-05 as pure verdicts: one spot node's life, as
``workloads.preemption:preemption`` and the drain replies recorded it.

The record: the idle-termination drain's reply; the probes sent while the node drained
(a soft and a hard affinity task, a new actor, a placement group only it could hold, and the
node's own row); the GCS's death record and the State API's rows of the node; the error of
the actor call it cut; the task's and the actor's outcomes after a second, plain kill of
where they went; and the order in which the task's owner learnt of the node's death and of
its first attempt's failure (its own log).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from chaos.testing import Judging, RaceLost, verdict

#: ``DeathReason`` values of ``ray.nodes()`` (``gcs.proto`` NodeDeathInfo.Reason).
AUTOSCALER_DRAIN_PREEMPTED = 3

Seen = Mapping[str, Any]


class SigtermRetryRaceLost(RaceLost):
    """The ``sigterm`` end's race went the other way: the task's first attempt failed at its
    owner before the GCS's notice of the node's death reached it, so Ray counted the retry
    (SIGTERM_RACE in the experiment), once the owner's log has ordered the two."""

    claims: ClassVar[tuple[str, ...]] = ("CHURN-05",)


class SigkillRetryRaceLost(RaceLost):
    """The ``sigkill`` end's race, as it usually goes: the task's first attempt failed at its
    owner before the GCS's notice of the node's death reached it, so Ray counted the retry
    (SIGKILL_RACE in the experiment). Once the notice came first and the retry was free."""

    claims: ClassVar[tuple[str, ...]] = ("CHURN-05",)


#: Each end's lost race.
RACE_LOST: dict[str, type[RaceLost]] = {
    "sigterm": SigtermRetryRaceLost,
    "sigkill": SigkillRetryRaceLost,
}


def knew_first(order: Mapping[str, Any]) -> bool:
    """Whether the owner held the node's death (its notice logged first) when the task's
    first attempt failed as NODE_DIED: Ray then calls the retry a preemption's, free."""
    return bool(order.get("death_first")) and order.get("error") == "NODE_DIED"


@verdict("CHURN-03")
def drain_keeps_work_off(j: Judging, idle: Mapping[str, Any], during: Seen, victim_id: str) -> str:
    """A busy node refuses an idle termination ("no longer idle"); while it drains for a
    preemption (still alive), a soft affinity and a new soft-pinned actor go elsewhere, a hard
    affinity fails with TaskUnschedulableError, and a bundle only it may hold stays PENDING."""
    j.require(not idle["accepted"], f"an idle termination of a busy node must be refused: {idle}")
    j.require("no longer idle" in str(idle["rejection"]), f"the refusal's reason: {idle}")
    soft, hard, actor = (
        during.get("soft") or {},
        during.get("hard") or {},
        during.get("actor") or {},
    )
    j.require(
        soft.get("error") is None and soft.get("node_id") not in (None, victim_id),
        f"a soft affinity to a draining node runs elsewhere: {soft}",
    )
    j.require(
        actor.get("error") is None and actor.get("node_id") not in (None, victim_id),
        f"a new actor soft-pinned to a draining node is placed elsewhere: {actor}",
    )
    j.require(
        hard.get("error") == "TaskUnschedulableError",
        f"a hard affinity to a draining node fails with TaskUnschedulableError: {hard}",
    )
    group = during.get("group") or {}
    j.require(
        not group.get("ready") and group.get("state") == "PENDING",
        f"a placement-group bundle only the draining node may hold is not placed: {group}",
    )
    # The probes ran while the node was alive and draining (the kill comes after them).
    j.require(
        (during.get("victim") or {}).get("Alive") is True, f"the node was not alive: {during}"
    )
    return (
        "the idle termination was refused, the preemption drain accepted, and while the node "
        "drained (alive) a soft affinity and a new actor went elsewhere, a hard one failed "
        "TaskUnschedulableError and a group only it may hold stayed PENDING"
    )


@verdict("CHURN-04")
def recorded_as_preemption(j: Judging, seen: Seen, message: str) -> str:
    """The node ended after its deadline is recorded as a preemption: the GCS's death record
    AUTOSCALER_DRAIN_PREEMPTED with the drain's message, the State API's "Terminated due to
    preemption: <message>", and the cut actor call's ActorDiedError ``preempted=True``."""
    record = seen["victim_record"] or {}
    j.require(
        record.get("DeathReason") == AUTOSCALER_DRAIN_PREEMPTED
        and record.get("DeathReasonMessage") == message,
        f"the GCS must record a preemption ({AUTOSCALER_DRAIN_PREEMPTED}, '{message}'): {record}",
    )
    states = [s["state_message"] for s in seen["victim_state"]]
    j.require(
        states == [f"Terminated due to preemption: {message}"], f"the State API's rows: {states}"
    )
    died = seen["busy_call"]["error"]
    j.require(
        died is not None and died["type"] == "ActorDiedError", f"the cut call: {seen['busy_call']}"
    )
    j.require(died.get("preempted") is True, f"ActorDiedError.preempted must be True: {died}")
    j.require(
        f"the actor's node was preempted: {message}" in died["message"],
        f"the error names the preemption: {died}",
    )
    return (
        "the GCS recorded AUTOSCALER_DRAIN_PREEMPTED with the drain's message, the State API "
        "'Terminated due to preemption', and the actor's ActorDiedError preempted=True"
    )


@verdict("CHURN-05")
def preemption_is_free(j: Judging, seen: Seen, order: Mapping[str, Any], end: str) -> str:
    """The retry and restart a preemption cost are free: a second, plain kill of where they
    went is survived with max_retries=1, max_restarts=1 (the actor restarted twice, once
    counted as the preemption's; the task in its third execution). At either end a counted
    retry the owner's log explains (its first attempt failed before the notice of the death
    reached it) is the lost race, the end's intermittent finding; one it does not explain
    fails."""
    j.require(
        seen["counter_after_kill"]["error"] is None,
        "the actor (max_restarts=1) must survive a preemption and a kill: "
        f"{seen['counter_after_kill']['error']}",
    )
    row = seen["counter_row_after_kill"]
    j.require(
        (row["num_restarts"], row["num_restarts_due_to_node_preemption"]) == (2, 1),
        f"two restarts, one the preemption's: {row}",
    )
    task = seen["task"]
    executions = len(seen["executions"])
    free = task["error"] is None and executions == 3
    if not knew_first(order):
        # The owner decided before it knew (SIGTERM_RACE, SIGKILL_RACE). A log that orders
        # nothing, or a free retry against Ray's own rule, is no lost race.
        if not (order.get("failure_first") or order.get("error") == "WORKER_DIED"):
            j.unknown(f"the owner's log must order the death and the failure: {dict(order)}")
        j.require(
            not free and not order.get("free_logged"),
            f"the owner decided before it knew of the death, yet the retry was free: {dict(order)}",
        )
        j.fail(
            f"the {end} end's race lost: the task's first attempt failed at its owner "
            f"({order.get('error')}) before the GCS's notice of the node's death reached it "
            f"(notice → failure {order.get('death_to_failure_s')} s), so its retry was counted: "
            f"{executions} executions, {(task['error'] or {}).get('type')}",
            RACE_LOST[end],
        )
    # The notice came first, so Ray's own rule makes the retry free: not the race.
    j.require(
        free,
        f"the task (max_retries=1) must survive the preemption and a kill: {executions} "
        f"executions, {task['error']}; the owner knew of the death first: {dict(order)}",
    )
    j.require(task["value"]["execution"] == 3, f"the third execution returns: {task['value']}")
    return "the actor's restart and the task's retry after the preemption were free"
