"""Production churn workloads (CHURN-*): a preempted spot node, and the steady-state work Ray's
nightly chaos tests keep running while a killer strikes (nested retried tasks, restartable
actors with sequence numbers), each judged exactly by the host.

Exceptions under test come back as data (``describe``), as in ``workloads.tasks``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import ray
from raychaos_agent import SIGNALS, emit, node_id, node_id_of, pin, until, wait_signal

from workloads.tasks import (
    connect,
    describe,
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


def _affinity(nid: str, soft: bool) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=nid, soft=soft)


def _executions(tally: Any, key: str, count: int, wait_s: float) -> list[dict[str, Any]]:
    hits = until(lambda: ray.get(tally.get.remote(key)), lambda h: len(h) >= count, wait_s)
    if len(hits) < count:
        raise RuntimeError(f"{key}: {len(hits)} executions after {wait_s} s, expected {count}")
    return list(hits)


def _actor_row(actor: Any) -> dict[str, Any]:
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
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def _stamp(line: str | None) -> float | None:
    found = _STAMP.match(line or "")
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() if found else None


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
    t_death, t_failed = _stamp(death_line), _stamp(failed_line)
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
        name=soft_name, num_cpus=0, scheduling_strategy=_affinity(victim_id, True)
    ).remote()
    hard = _where.options(num_cpus=0, scheduling_strategy=_affinity(victim_id, False)).remote()
    newcomer = Holder.options(num_cpus=0, scheduling_strategy=_affinity(victim_id, True)).remote()
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
    counter_after_preemption = _actor_row(counter)
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
        "counter_row_after_kill": _actor_row(counter),
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


# --------------------------------------------------------------------------------------------
# CHURN-01 / CHURN-02: steady-state work under a seeded killer (Ray's nightly chaos tests)
# --------------------------------------------------------------------------------------------


@ray.remote(max_retries=-1)
def _child(parent: int, j: int) -> int:
    time.sleep(0.2)
    return parent * 100 + j


@ray.remote(max_retries=-1)
def _parent(i: int, width: int) -> int:
    """A nested task: its children are owned by it, so its death loses them and its retry
    submits them again (what the killer exercises)."""
    return sum(ray.get([_child.remote(i, j) for j in range(width)]))


@ray.remote(max_restarts=-1, max_task_retries=-1)
class Sequenced:
    """Answers numbered calls; logs each execution to the tally (on the driver node, never
    struck), so duplicates from retries are counted."""

    def __init__(self, name: str, log: Any) -> None:
        self.name, self.log = name, log

    def step(self, seq: int) -> int:
        ray.get(self.log.hit.remote(f"{self.name}:{seq}"))  # logged before the reply leaves
        time.sleep(0.05)
        return seq


@ray.remote(num_cpus=0)
class Executions:
    """How often each numbered call ran (on the driver node, never struck)."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def hit(self, key: str) -> None:
        self.seen[key] = self.seen.get(key, 0) + 1

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


#: Streaming generators (Ray's nightly ``streaming_generator_workload``, in small): each item
#: is ITEM_BYTES in the object store (above the 100 KiB inline limit) and names its index.
ITEM_BYTES = 256 * 1024
#: Borrowed objects (its ``object_ref_borrowing_workload``): each object is BORROWED_BYTES.
BORROWED_BYTES = 512 * 1024


@ray.remote(num_cpus=0.5, max_retries=-1)
def _stream(tag: str, items: int) -> Any:
    for i in range(items):
        time.sleep(0.05)
        yield f"{tag}:{i}".encode().ljust(ITEM_BYTES, b".")


@ray.remote(num_cpus=0.5, max_retries=-1)
def _consume(tag: str, items: int) -> dict[str, Any]:
    """Reads every item a streaming generator yields: their indices in order and their bytes
    (a retry of this task starts the generator again)."""
    seen, total = [], 0
    for ref in _stream.remote(tag, items):
        item = ray.get(ref)
        seen.append(int(item.split(b".", 1)[0].decode().rsplit(":", 1)[1]))
        total += len(item)
    return {"indices": seen, "bytes": total}


@ray.remote(num_cpus=0.5, max_retries=-1)
def _create(tag: str) -> bytes:
    return tag.encode().ljust(BORROWED_BYTES, b".")


@ray.remote(num_cpus=0.5, max_retries=-1)
def _borrow(refs: list[Any]) -> dict[str, Any]:
    """Reads an object it was lent (a ref inside a list is borrowed, not resolved)."""
    data = ray.get(refs[0])
    return {"tag": data.split(b".", 1)[0].decode(), "bytes": len(data)}


@ray.remote(num_cpus=0.25, max_retries=-1)
def _echo(tag: str, i: int) -> str:
    time.sleep(0.1)
    return f"{tag}:{i}"


def rpc_probe(tag: str, calls: int = 4, timeout_s: float = 240.0) -> dict[str, Any]:
    """An ``rpc_failure`` strike's driver (its task pushes fail by Ray's injection): ``calls``
    retried tasks, each returning its own tag and number → ``outcome``."""
    connect()
    started = time.time()
    values = ray.get([_echo.remote(tag, i) for i in range(calls)], timeout=timeout_s)
    outcome = {"tag": tag, "values": values, "s": round(time.time() - started, 2)}
    emit("outcome", **outcome)
    return outcome


def _expected_parent(i: int, width: int) -> int:
    return sum(i * 100 + j for j in range(width))


def steady(
    actors: int = 2,
    parents: int = 6,
    width: int = 3,
    batch: int = 10,
    streams: int = 2,
    items: int = 8,
    borrows: int = 2,
    round_timeout_s: float = 300.0,
) -> dict[str, Any]:
    """CHURN-01/02/09/10: four lanes in rounds, one thread each, until the host raises
    ``stop``; then one last round each. Nested retried tasks; numbered calls to restartable
    actors; ``streams`` streaming generators of ``items`` items, each read by a retried
    consumer task; ``borrows`` objects made by a retried task and lent to another inside a
    list (Ray's nightly workloads, all with ``max_retries=-1``).

    Every second: ``load_second`` (``ok``/``failed``: items completed per lane). Returns the
    exact tallies the host judges: every parent's value, every call's returned number, every
    generator's item indices in order and its bytes, every borrowed object's tag and bytes;
    and how often each numbered call ran.
    """
    import threading

    connect()
    log = Executions.options(scheduling_strategy=pin("driver")).remote()
    handles = [Sequenced.options(num_cpus=0.5).remote(f"actor-{k}", log) for k in range(actors)]
    lanes = ("tasks", "actor calls", "generator items", "borrowed objects")
    counts = dict.fromkeys(lanes, 0)
    wrong: dict[str, list[Any]] = {lane: [] for lane in lanes}
    sent = dict.fromkeys(lanes, 0)
    errors: list[dict[str, Any]] = []
    stop = threading.Event()
    lock = threading.Lock()

    # Each lane: what one round submits (keys, refs, items sent), how one result is judged
    # (items done, the wrong entry or None), and the pause between rounds.
    Judge = Callable[[Any, Any], tuple[int, list[Any] | None]]
    Submit = Callable[[int], tuple[list[Any], list[Any], int]]

    def rounds(lane: str, submit: Submit, judge: Judge, pause_s: float) -> None:
        r = 0
        while True:
            last = stop.is_set()
            keys, refs, items_sent = submit(r)
            with lock:
                sent[lane] += items_sent
            values = ray.get(refs, timeout=round_timeout_s)
            with lock:
                for key, value in zip(keys, values, strict=True):
                    done, bad = judge(key, value)
                    counts[lane] += done
                    if bad is not None:
                        wrong[lane].append(bad)
            r += 1
            if last:
                return
            time.sleep(pause_s)

    def parents_of(r: int) -> tuple[list[Any], list[Any], int]:
        ids = list(range(r * parents, (r + 1) * parents))
        return ids, [_parent.remote(n, width) for n in ids], len(ids)

    def calls_of(r: int) -> tuple[list[Any], list[Any], int]:
        keys = [(k, s) for k in range(len(handles)) for s in range(r * batch, (r + 1) * batch)]
        return keys, [handles[k].step.remote(s) for k, s in keys], len(keys)

    def streams_of(r: int) -> tuple[list[Any], list[Any], int]:
        tags = [f"g{r}-{k}" for k in range(streams)]
        return tags, [_consume.remote(tag, items) for tag in tags], items * len(tags)

    def borrows_of(r: int) -> tuple[list[Any], list[Any], int]:
        tags = [f"b{r}-{k}" for k in range(borrows)]
        return tags, [_borrow.remote([_create.remote(tag)]) for tag in tags], len(tags)

    whole = {"indices": list(range(items)), "bytes": items * ITEM_BYTES}
    plan: list[tuple[Submit, Judge, float]] = [
        (parents_of, lambda n, v: (1, None if v == _expected_parent(n, width) else [n, v]), 0.0),
        (calls_of, lambda ks, v: (1, None if v == ks[1] else [*ks, v]), 0.0),
        (
            streams_of,
            lambda tag, got: (
                len(got["indices"]),
                None if got == whole else [tag, got["indices"], got["bytes"]],
            ),
            0.5,
        ),
        (
            borrows_of,
            lambda tag, got: (
                1,
                None if got == {"tag": tag, "bytes": BORROWED_BYTES} else [tag, got],
            ),
            0.5,
        ),
    ]

    def guarded(lane: str, submit: Submit, judge: Judge, pause_s: float) -> None:
        try:
            rounds(lane, submit, judge, pause_s)
        except Exception as exc:  # noqa: BLE001 - a lane that gives up is the verdict's data
            errors.append({"lane": lane, **describe(exc)})

    threads = [
        threading.Thread(target=guarded, args=(lane, *how), daemon=True)
        for lane, how in zip(lanes, plan, strict=True)
    ]
    for thread in threads:
        thread.start()
    emit(
        "steady_running",
        actors=actors,
        parents=parents,
        width=width,
        streams=streams,
        items=items,
        borrows=borrows,
    )
    before = dict(counts)
    stopped_at = None
    while any(t.is_alive() for t in threads):
        time.sleep(1.0)  # the reporting period of load_second
        with lock:
            now = dict(counts)
        emit("load_second", ok={k: now[k] - before[k] for k in now}, failed={})
        before = now
        if stopped_at is None and os.path.exists(os.path.join(SIGNALS, "stop")):
            stop.set()
            stopped_at = time.time()
    executed = ray.get(log.counts.remote())
    return {
        "sent": sent,
        "completed": counts,
        "wrong": wrong,
        "errors": errors,
        "executed": executed,
        "stopped_at": stopped_at,
    }
