"""A preempted spot node (CHURN-03/04/05) and a pod's graceful stop by SIGTERM (CHURN-08):
the work on the node (a task, actors, a placement group), its drain as the GCS replied, and the
owner's log lines that order a retry against the notice of the node's death.

Exceptions under test come back as data (``describe``), as in ``workloads.tasks``.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import ray
from raychaos_agent import (
    emit,
    node_id,
    node_id_of,
    pin,
    until,
    wait_signal,
)

from workloads.tasks import (
    connect,
    log_stamp,
    make_tally,
    name_of,
    node_record,
    outcome_of,
    owner_log,
    task_attempts,
)


@ray.remote
class Holder:
    """An actor that says where it runs (its node and process)."""

    def where(self) -> dict[str, Any]:
        return {"node_id": node_id(), "pid": os.getpid(), "t": time.time()}

    def hold(self, seconds: float) -> dict[str, Any]:
        time.sleep(seconds)
        return self.where()


@ray.remote
def _where() -> dict[str, Any]:
    return {"node_id": node_id(), "pid": os.getpid(), "t": time.time()}


@ray.remote
def _held(tally: Any, key: str, strikes: int, hold_s: float) -> dict[str, Any]:
    """Holds through its first ``strikes`` executions (each waits to be struck), then returns."""
    n = ray.get(tally.hit.remote(key, node_id(), os.getpid()))
    if n <= strikes:
        time.sleep(hold_s)
    return {"execution": n, "node_id": node_id(), "pid": os.getpid(), "t": time.time()}


def affinity(nid: str, soft: bool) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=nid, soft=soft)


def _executions(tally: Any, key: str, count: int, wait_s: float) -> list[dict[str, Any]]:
    hits = until(lambda: ray.get(tally.get.remote(key)), lambda h: len(h) >= count, wait_s)
    if len(hits) < count:
        raise RuntimeError(f"{key}: {len(hits)} executions after {wait_s} s, expected {count}")
    return list(hits)


def actor_row(actor: Any) -> dict[str, Any]:
    from ray.util.state import get_actor

    row = get_actor(actor._actor_id.hex(), timeout=20)
    data = row.__dict__ if hasattr(row, "__dict__") else dict(row or {})
    keep = ("state", "num_restarts", "num_restarts_due_to_node_preemption", "node_id")
    return {k: data.get(k) for k in keep}


def _state_message(nid: str) -> Any:
    from ray.util.state import list_nodes

    rows = list_nodes(
        filters=[("node_id", "=", nid)],
        detail=True,
        timeout=20,
        limit=10000,
        raise_on_missing_output=False,
    )
    return [
        {"state": r.state, "state_message": r.state_message, "end_time_ms": r.end_time_ms}
        for r in rows
    ]


def _group_on(victim: str, wait_s: float) -> dict[str, Any]:
    """A one-bundle placement group only ``victim`` may hold (a label selector on its name; a
    bundle of 1 MiB of logical memory, which it has free): placed within ``wait_s`` or not,
    where, and its state; removed after."""
    from ray.util.placement_group import (
        placement_group,
        placement_group_table,
        remove_placement_group,
    )

    group = placement_group(
        [{"memory": 1024**2}], bundle_label_selector=[{"raychaos/node": victim}]
    )
    started = time.time()
    ready, _ = ray.wait([group.ready()], timeout=wait_s)
    table = placement_group_table(group)
    remove_placement_group(group)
    return {
        "ready": bool(ready),
        "s": round(time.time() - started, 2),
        "state": table.get("state"),
        "node_id": (table.get("bundles_to_node_id") or {}).get(0),
    }


#: The owner's log lines that order its retry decision (``task_manager.cc``: "Task attempt
#: <id> failed with error <type>") against the GCS's notice of the node's death
#: (``accessor.cc``: "Received address and liveness notification for node, IsAlive = 0").
_FAILED = re.compile(r"Task attempt (\w+) failed with error (\w+)")


def owner_order(victim_id: str, task_id: str) -> dict[str, Any]:
    """What reached this driver, the task's owner, first (its log's order): the GCS's notice
    that ``victim_id`` is dead, or the failure of the task's first attempt, which is where the
    owner decides whether the retry is free (``TaskManager::RetryTaskIfPossible`` reads the
    death from the same node cache that notice fills)."""
    path = owner_log()
    lines: list[str] = []
    if path:
        with open(path, errors="replace") as log:
            lines = log.read().splitlines()
    death = next((i for i, x in enumerate(lines) if victim_id in x and "IsAlive = 0" in x), None)
    failed = next(
        (i for i, x in enumerate(lines) if (m := _FAILED.search(x)) and m[1] == task_id), None
    )
    death_line = lines[death] if death is not None else None
    failed_line = lines[failed] if failed is not None else None
    t_death, t_failed = log_stamp(death_line), log_stamp(failed_line)
    error = _FAILED.search(failed_line or "")
    return {
        "log": path,
        # Both seen, in this order (a missing line decides nothing).
        "death_first": death is not None and failed is not None and death < failed,
        "failure_first": death is not None and failed is not None and failed < death,
        "error": error[2] if error else None,
        "death_to_failure_s": (
            round(t_failed - t_death, 3) if t_death is not None and t_failed is not None else None
        ),
        "free_logged": any(task_id in x and "not counting against retries" in x for x in lines),
        "death_line": (death_line or "")[:240],
        "failure_line": (failed_line or "")[:240],
    }


def preemption(
    victim: str = "worker-1", probe_s: float = 15.0, wait_s: float = 180.0, group_s: float = 5.0
) -> dict:
    """CHURN-03/04/05 on one spot node, in the host's rhythm (events → host, signals → here).

    1. ``placed``: on ``victim``, an actor that keeps it busy (``busy``, 1 CPU, no restarts),
       a restartable actor (``counter``: ``max_restarts=1``) and a task that holds through two
       strikes (``task``: ``max_retries=1``), both soft-pinned; and a control: a 0-CPU task
       soft-pinned and one hard-pinned to ``victim`` run there.
    2. signal ``drained`` (the host drained ``victim``): the same two probes and a 0-CPU actor
       soft-pinned to it, bounded by ``probe_s`` → ``during_drain``.
    3. signal ``preempted`` (the host killed ``victim`` after the deadline): ``busy``'s call
       (its error is the preemption's), ``counter`` answering again, ``task``'s second
       execution → ``recovered`` (their nodes, for the second strike).
    4. signal ``second`` (the host killed those nodes without a drain): ``counter`` must answer
       a third time and ``task`` return from a third execution, which only the preemption's
       free restart and retry leave budget for.

    Placement groups: a one-bundle group only ``victim`` may hold is placed there before the
    drain (control ``group``), and is not placed within ``group_s`` while it drains.
    """
    connect()
    tally = make_tally()
    key = f"task-{os.getpid()}"
    victim_id = node_id_of(victim)
    busy = Holder.options(num_cpus=1, max_restarts=0, scheduling_strategy=pin(victim)).remote()
    counter = Holder.options(
        num_cpus=1, max_restarts=1, max_task_retries=-1, scheduling_strategy=pin(victim, True)
    ).remote()
    placed = ray.get([busy.where.remote(), counter.where.remote()], timeout=wait_s)
    task = _held.options(
        name=key, num_cpus=1, max_retries=1, scheduling_strategy=pin(victim, True)
    ).remote(tally, key, 2, 3600.0)
    first = _executions(tally, key, 1, wait_s)[0]
    control = {
        "soft": outcome_of(
            _where.options(num_cpus=0, scheduling_strategy=pin(victim, True)).remote(), probe_s
        ),
        "hard": outcome_of(
            _where.options(num_cpus=0, scheduling_strategy=pin(victim)).remote(), probe_s
        ),
    }
    group = _group_on(victim, probe_s)
    emit(
        "placed",
        victim_id=victim_id,
        busy=placed[0]["node_id"],
        counter=placed[1]["node_id"],
        task=first["node_id"],
        control={k: (v["value"] or {}).get("node_id") for k, v in control.items()},
        group=group,
    )

    wait_signal("drained", wait_s)
    soft_name = f"soft-probe-{os.getpid()}"
    soft = _where.options(
        name=soft_name, num_cpus=0, scheduling_strategy=affinity(victim_id, True)
    ).remote()
    hard = _where.options(num_cpus=0, scheduling_strategy=affinity(victim_id, False)).remote()
    newcomer = Holder.options(num_cpus=0, scheduling_strategy=affinity(victim_id, True)).remote()
    during = {
        "soft": outcome_of(soft, probe_s),
        "hard": outcome_of(hard, probe_s),
        "actor": outcome_of(newcomer.where.remote(), probe_s),
    }
    if during["soft"]["error"] is not None:
        # Where the probe stood when the bound ran out (its state and node), for the evidence.
        during["soft"]["attempts"] = task_attempts(soft_name, wait_s=5)
    group_during = _group_on(victim, group_s)
    during["victim"] = node_record(victim_id)
    emit(
        "during_drain",
        victim={"Alive": (during["victim"] or {}).get("Alive")},
        group=group_during,
        **{k: _brief(v) for k, v in during.items() if k != "victim"},
    )

    wait_signal("preempted", wait_s)
    died = outcome_of(busy.where.remote(), wait_s)
    again = outcome_of(counter.where.remote(), wait_s)
    second = _executions(tally, key, 2, wait_s)[1]
    counter_after_preemption = actor_row(counter)
    emit(
        "recovered",
        counter=(again["value"] or {}).get("node_id"),
        counter_name=name_of((again["value"] or {}).get("node_id")),
        task=second["node_id"],
        task_name=name_of(second["node_id"]),
    )

    wait_signal("second", wait_s)
    third_call = outcome_of(counter.where.remote(), wait_s)
    done = outcome_of(task, wait_s)
    record = until(lambda: node_record(victim_id), lambda r: bool(r) and not r.get("Alive"), 30)
    attempts = task_attempts(key, wait_s=30)
    return {
        "victim_id": victim_id,
        "placed": placed,
        "control": control,
        "during": during,
        "busy_call": died,
        "counter_after_preemption": again,
        "counter_row_after_preemption": counter_after_preemption,
        "counter_after_kill": third_call,
        "counter_row_after_kill": actor_row(counter),
        "task": done,
        "executions": ray.get(tally.get.remote(key)),
        "attempts": attempts,
        "owner_order": owner_order(victim_id, attempts[0]["task_id"]) if attempts else None,
        "victim_record": record,
        "victim_state": _state_message(victim_id),
    }


def _brief(outcome: dict[str, Any]) -> dict[str, Any]:
    value, error = outcome["value"] or {}, outcome["error"] or {}
    brief = {"node_id": value.get("node_id"), "error": error.get("type"), "s": outcome["s"]}
    if "attempts" in outcome:
        brief["attempts"] = outcome["attempts"]
    return brief


def sigterm(
    quiet: str = "quiet", busy: str = "busy", task_s: float = 6.0, wait_s: float = 120.0
) -> dict[str, Any]:
    """CHURN-08: two nodes whose blocking ``ray start`` the host stops with SIGTERM.

    1. ``placed``: on ``busy``, an actor (no restarts) in a call that outlasts any drain; on
       ``quiet``, a task of ``task_s`` seconds (``max_retries=0``) has started.
    2. signal ``terminated`` (both nodes had SIGTERM): the task's outcome (it should end on
       its node, through the drain), the actor call's (its node ends under it), then both
       nodes' GCS records and State API rows once they are dead.
    """
    connect()
    tally = make_tally()
    key = f"sigterm-{os.getpid()}"
    ids = {quiet: node_id_of(quiet), busy: node_id_of(busy)}
    holder = Holder.options(num_cpus=1, max_restarts=0, scheduling_strategy=pin(busy)).remote()
    held = ray.get(holder.where.remote(), timeout=wait_s)
    call = holder.hold.remote(3600.0)
    task = _held.options(num_cpus=1, max_retries=0, scheduling_strategy=pin(quiet)).remote(
        tally, key, 1, task_s
    )
    started = _executions(tally, key, 1, wait_s)[0]
    emit("placed", ids=ids, actor=held["node_id"], task=started["node_id"])

    wait_signal("terminated", wait_s)
    done = outcome_of(task, wait_s)
    died = outcome_of(call, wait_s)
    records = {
        name: until(lambda n=nid: node_record(n), lambda r: bool(r) and not r.get("Alive"), wait_s)
        for name, nid in ids.items()
    }
    return {
        "ids": ids,
        "task": done,
        "executions": ray.get(tally.get.remote(key)),
        "call": died,
        "records": records,
        "states": {name: _state_message(nid) for name, nid in ids.items()},
    }
