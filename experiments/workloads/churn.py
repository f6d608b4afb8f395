"""Production churn workloads (CHURN-*): a preempted spot node, and the steady-state work Ray's
nightly chaos tests keep running while a killer strikes (nested retried tasks, restartable
actors with sequence numbers), each judged exactly by the host.

Exceptions under test come back as data (``describe``), as in ``workloads.tasks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import Callable
from typing import Any

import ray
from raychaos_agent import (
    SIGNALS,
    emit,
    node_id,
    node_id_of,
    nodes,
    pin,
    until,
    wait_signal,
)

from workloads.tasks import (
    connect,
    describe,
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
# CHURN-01 / 02 / 09 / 10: steady-state work under a seeded killer (Ray's nightly chaos tests)
# --------------------------------------------------------------------------------------------

#: The State API names of the steady workload's tasks, so each lane's attempts are counted from
#: Ray's own records: an attempt number above 0 is a retry, or a rebuild when the attempt
#: before it had finished (lineage reconstruction resubmits a finished task).
PARENT, CHILD = "steady-parent", "steady-child"
CONSUME, STREAM = "steady-consume", "steady-stream"
CREATE, BORROW = "steady-create", "steady-borrow"
#: The owner's log line for a rebuild (``TaskManager::ResubmitTask``, task_manager.cc).
RESUBMITTED = "Resubmitting task that produced lost plasma object"


@ray.remote(max_retries=-1)
def _child(parent: int, j: int, child_s: float) -> int:
    time.sleep(child_s)
    return parent * 100 + j


@ray.remote(max_retries=-1)
def _parent(i: int, width: int, child_s: float) -> int:
    """A nested task: its children are owned by it, so its death loses them and its retry
    submits them again (what the killer exercises)."""
    return sum(ray.get([_child.options(name=CHILD).remote(i, j, child_s) for j in range(width)]))


@ray.remote(max_retries=-1)
def _anchored_child(parent: int, j: int, anchor: Any) -> int:
    _hold(*anchor, f"child {parent}.{j}")
    return parent * 100 + j


@ray.remote(max_retries=-1)
def _anchored_parent(i: int, width: int, where: str | None, anchor: Any) -> int:
    """An anchor of the nested lane: its children (on ``where``, soft) hold until the host's
    stop, so this parent and they are running on their nodes through every strike."""
    ray.get(anchor[1].holding.remote(f"parent {i}", node_id()))
    children = [
        _anchored_child.options(
            name=CHILD, num_cpus=0, resources=LANE, scheduling_strategy=_soft(where)
        ).remote(i, j, anchor)
        for j in range(width)
    ]
    return sum(ray.get(children))


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
        self.held: list[dict[str, Any]] = []

    def hit(self, key: str) -> None:
        self.seen[key] = self.seen.get(key, 0) + 1

    def counts(self) -> dict[str, int]:
        return dict(self.seen)

    def holding(self, key: str, node: str) -> None:
        """An anchor's attempt began to hold on ``node`` (each retry reports again)."""
        self.held.append({"key": key, "node_id": node, "t": time.time()})

    def holdings(self) -> list[dict[str, Any]]:
        return list(self.held)


@ray.remote(num_cpus=0)
class Until:
    """The host's stop, for the anchors on other nodes (on the driver node, never struck)."""

    def __init__(self) -> None:
        self.stopped = asyncio.Event()

    async def stop(self) -> None:
        self.stopped.set()

    async def wait(self, timeout_s: float) -> bool:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), timeout_s)
        return self.stopped.is_set()


def _hold(until: Any, log: Any, key: str) -> None:
    """Reports this attempt holding (its node), then holds until the host's stop."""
    ray.get(log.holding.remote(key, node_id()))
    while not ray.get(until.wait.remote(30.0)):
        pass


#: Streaming generators (Ray's nightly ``streaming_generator_workload``, in small): each item
#: is ITEM_BYTES in the object store (above the 100 KiB inline limit) and names its index.
ITEM_BYTES = 256 * 1024
#: Borrowed objects (its ``object_ref_borrowing_workload``): each object is BORROWED_BYTES.
BORROWED_BYTES = 512 * 1024
#: The generator, consumer, maker and borrower tasks and the actors need no CPU but one unit
#: of this resource, which only the experiment's workers have (plenty of it): they stay on
#: the workers and never wait behind the nested tasks' CPUs (which they did, in a run whose
#: kill found three consumers on its node and not one generator), so each starts where its
#: soft affinity puts it.
LANE = {"steady_lanes": 1}


#: The anchors' ids in the nested lane (apart from the rounds' 0, 1, …) and how many children
#: each holds.
ANCHOR_IDS = 1_000_000
ANCHOR_WIDTH = 1
#: The nested-task, generator and borrowed-object lanes submit a round every half of a
#: round's length (a generator's items × item_s, a borrower's hold_s; a nested round's 18
#: children of child_s queue on 6 CPUs, three waves, so every child_s), at most two in flight
#: (the nested tasks one, their children already queue): the rounds measure throughput and
#: put fresh work under the strikes; the anchors, not the rounds' density, make sure a strike
#: reaches every lane. Three in flight kept 14 Ray processes per worker and a load of 40-50 on
#: two cores, starving the clusters beside it.
IN_FLIGHT = 2


def _back(refs: list[Any]) -> bool:
    """Whether every one of ``refs`` is ready (a look, no wait, nothing fetched)."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
    return len(ready) == len(refs)


def _soft(nid: str | None) -> Any:
    """A soft affinity to ``nid`` (elsewhere when that node is gone), or Ray's default."""
    return _affinity(nid, True) if nid else "DEFAULT"


@ray.remote(num_cpus=0, resources=LANE, max_retries=-1)
def _stream(tag: str, items: int, item_s: float, anchor: Any = None) -> Any:
    """``items`` items of ITEM_BYTES, one every ``item_s``; an anchor's (``anchor``: its
    ``(until, log)``) holds before its last item until the host's stop, so its node holds a
    running generator through every strike (the items stay the same: a retry is exact)."""
    for i in range(items):
        time.sleep(item_s)
        if anchor is not None and i == items - 1:
            _hold(*anchor, f"generator {tag}")
        yield f"{tag}:{i}".encode().ljust(ITEM_BYTES, b".")


@ray.remote(num_cpus=0, resources=LANE, max_retries=-1)
def _consume(
    tag: str, items: int, item_s: float, where: str | None, anchor: Any = None
) -> dict[str, Any]:
    """Starts a streaming generator on node ``where`` (soft), another node than its own, and
    reads every item it yields: their indices in order and their bytes. The generator's node
    dying leaves this owner alive, so the generator itself is retried; this task's node dying
    retries it, and the retry starts the generator again."""
    seen, total = [], 0
    for ref in _stream.options(name=STREAM, scheduling_strategy=_soft(where)).remote(
        tag, items, item_s, anchor
    ):
        item = ray.get(ref)
        seen.append(int(item.split(b".", 1)[0].decode().rsplit(":", 1)[1]))
        total += len(item)
    return {"indices": seen, "bytes": total}


@ray.remote(num_cpus=0, resources=LANE, max_retries=-1)
def _create(tag: str) -> bytes:
    return tag.encode().ljust(BORROWED_BYTES, b".")


@ray.remote(num_cpus=0, resources=LANE, max_retries=-1)
def _borrow(refs: list[Any], hold_s: float, anchor: Any = None) -> dict[str, Any]:
    """Reads an object it was lent (a ref inside a list is borrowed, not resolved), after
    holding the reference ``hold_s`` from the moment the object exists: meanwhile it lives
    only on its maker's node, so a strike there loses it and Ray must rebuild it for this
    borrower. (Held from the borrower's own start instead, the object of a maker that
    started late lived a moment only: a run's node kill found none to lose.)"""
    ray.wait(refs, num_returns=1, fetch_local=False)  # made, and not copied here
    if anchor is not None:  # an anchor's: holds it until the host's stop
        _hold(*anchor, f"borrower of {refs[0].hex()[:12]}")
    else:
        time.sleep(hold_s)
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


def _workers() -> list[str]:
    """The node ids of the ALIVE worker nodes, ordered by name (a replaced node keeps its
    name and address, and joins with a new id)."""
    names = {n["ip"]: name for name, n in nodes().items() if n.get("role") == "worker"}
    alive = {
        names[n["NodeManagerAddress"]]: str(n["NodeID"])
        for n in ray.nodes()
        if n["Alive"] and n["NodeManagerAddress"] in names
    }
    return [alive[name] for name in sorted(alive)]


#: The most rows the State API returns for one query (RAY_MAX_LIMIT_FROM_API_SERVER, 10 000:
#: ray/util/state/common.py).
STATE_ROWS = 10_000


def _attempts(name: str) -> dict[str, Any]:
    """From the State API, the tasks called ``name`` (each listed once per attempt): how many,
    how many were retried (an attempt above 0 after a failed one), by the failed attempt's
    error type, how many were rebuilt (an attempt after one that had finished: lineage
    reconstruction of a lost object), on which node (Ray node id) each attempt that a retry
    or a rebuild followed had run, and when each attempt ran where (``spans``: per node id,
    start and end in ms, end 0 while running or never recorded)."""
    from ray.util.state import list_tasks

    rows = list_tasks(
        filters=[("name", "=", name)],
        limit=STATE_ROWS,
        timeout=60,
        detail=True,
        raise_on_missing_output=False,
    )
    tried: dict[str, dict[int, tuple[str, str, str]]] = {}
    spans: dict[str, list[list[int]]] = {}
    for row in rows:
        tried.setdefault(str(row.task_id), {})[int(row.attempt_number)] = (
            str(row.state),
            str(row.error_type),
            str(row.node_id),
        )
        if row.node_id and row.start_time_ms:
            spans.setdefault(str(row.node_id), []).append(
                [int(row.start_time_ms), int(row.end_time_ms or 0)]
            )
    causes: dict[str, int] = {}
    where: dict[str, int] = {}
    retried = rebuilt = 0
    for attempts in tried.values():
        before = [b for n in attempts if n > 0 and (b := attempts.get(n - 1)) is not None]
        failed = [b for b in before if b[0] == "FAILED"]
        lost = [b for b in before if b[0] == "FINISHED"]
        retried += bool(failed)
        rebuilt += bool(lost)
        for state, cause, node in failed + lost:
            key = cause if state == "FAILED" else "rebuilt"
            causes[key] = causes.get(key, 0) + 1
            where[node] = where.get(node, 0) + 1
    return {
        "tasks": len(tried),
        "attempts": len(rows),
        # The State API returns at most 10 000 rows (its limit): more attempts than that
        # are not all counted (the ten-minute run's nested children).
        "truncated": len(rows) >= STATE_ROWS,
        "later_attempts": sum(1 for a in tried.values() if max(a) > 0),
        "retried": retried,
        "causes": causes,
        "rebuilt": rebuilt,
        "where": where,
        "spans": spans,
    }


def _resubmitted(name: str) -> dict[str, Any]:
    """This driver's log lines that resubmit a finished task of ``name`` to rebuild its lost
    object (Ray's own words, ``RESUBMITTED``)."""
    path = owner_log()
    lines: list[str] = []
    if path:
        with open(path, errors="replace") as log:
            lines = [x for x in log if RESUBMITTED in x]
    ours = [x for x in lines if name in x or "function_name=_create" in x]
    return {"lines": len(ours), "all": len(lines), "first": ours[0][:400] if ours else None}


def steady(
    actors_per_worker: int = 1,
    parents: int = 6,
    width: int = 3,
    child_s: float = 0.5,
    batch: int = 10,
    items: int = 8,
    item_s: float = 0.5,
    hold_s: float = 5.0,
    round_timeout_s: float = 300.0,
) -> dict[str, Any]:
    """CHURN-01/02/09/10: four lanes in rounds, one thread each, until the host raises
    ``stop``; then one last round each. Nested retried tasks; numbered calls to restartable
    actors; streaming generators of ``items`` items, each read by a retried consumer task that
    starts it; objects made by a retried task and lent to another inside a list (Ray's nightly
    workloads, all with ``max_retries=-1``).

    Placement, so that a strike on any worker reaches every lane (as Ray's nightly
    ``streaming_generator_workload`` spreads its generators "to ensure chaos events affect
    the generators"): before the host may strike, each worker holds an *anchor* of every lane
    — a parent whose child holds on the next worker, a generator (read from the previous
    worker) holding before its last item, a borrower holding an object made on the previous
    worker — each holding until the host's ``stop`` (``Until``), and one restartable actor
    (soft affinity). The rounds come on top: the parents of every round of nested tasks
    spread over the ALIVE workers (soft, by name, their children where Ray puts them); every
    round of the generator lane starts one consumer on each worker, its generator on the next
    worker by name, and of the borrowed-object lane one maker on each worker, its borrower on
    the next, which holds the reference ``hold_s`` from the moment the object exists before
    reading it; a round every half a round's length (at most IN_FLIGHT in flight). Anchors are
    judged like any round once released.

    Every second: ``load_second`` (``ok``/``failed``: items completed per lane). Returns the
    exact tallies the host judges: every parent's value, every call's returned number, every
    generator's item indices in order and its bytes, every borrowed object's tag and bytes;
    how often each numbered call ran; and ``hits``, what the strikes did to each lane as Ray
    records it (task attempts from the State API, the actors' restarts, the rebuilds).
    """
    import threading
    from collections import deque

    connect()
    log = Executions.options(scheduling_strategy=pin("driver")).remote()
    until_stop = Until.options(scheduling_strategy=pin("driver")).remote()
    workers = _workers()
    handles = [
        Sequenced.options(num_cpus=0, resources=LANE, scheduling_strategy=_soft(nid)).remote(
            f"actor-{k}", log
        )
        for k, nid in enumerate(w for w in workers for _ in range(actors_per_worker))
    ]
    lanes = ("tasks", "actor calls", "generator items", "borrowed objects")
    counts = dict.fromkeys(lanes, 0)
    wrong: dict[str, list[Any]] = {lane: [] for lane in lanes}
    sent = dict.fromkeys(lanes, 0)
    errors: list[dict[str, Any]] = []
    stop = threading.Event()
    lock = threading.Lock()

    # Each lane: what one round submits (keys, refs, items sent), how one result is judged
    # (items done, the wrong entry or None), how many rounds it may have in flight, and how
    # long after a round it submits the next.
    Judge = Callable[[Any, Any], tuple[int, list[Any] | None]]
    Submit = Callable[[int], tuple[list[Any], list[Any], int]]

    def rounds(lane: str, submit: Submit, judge: Judge, depth: int, every_s: float) -> None:
        """Submit a round every ``every_s`` (0: once the last one is judged), at most
        ``depth`` in flight, judging each, oldest first, once all of it is back."""
        r = 0
        flight: deque[tuple[list[Any], list[Any]]] = deque()
        while True:
            last = stop.is_set()
            keys, refs, items_sent = submit(r)
            with lock:
                sent[lane] += items_sent
            flight.append((keys, refs))
            r += 1
            while flight and (last or len(flight) >= depth or _back(flight[0][1])):
                keys, refs = flight.popleft()
                values = ray.get(refs, timeout=round_timeout_s)
                with lock:
                    for key, value in zip(keys, values, strict=True):
                        done, bad = judge(key, value)
                        counts[lane] += done
                        if bad is not None:
                            wrong[lane].append(bad)
            if last:
                return
            time.sleep(every_s)  # the lane's cadence: rounds overlap, their starts apart

    def parents_of(r: int) -> tuple[list[Any], list[Any], int]:
        nodes_now = _workers()
        ids = list(range(r * parents, (r + 1) * parents))
        refs = [
            _parent.options(
                name=PARENT, scheduling_strategy=_soft(nodes_now[k % len(nodes_now)])
            ).remote(n, width, child_s)
            for k, n in enumerate(ids)
        ]
        return ids, refs, len(ids)

    def calls_of(r: int) -> tuple[list[Any], list[Any], int]:
        keys = [(k, s) for k in range(len(handles)) for s in range(r * batch, (r + 1) * batch)]
        return keys, [handles[k].step.remote(s) for k, s in keys], len(keys)

    def streams_of(r: int) -> tuple[list[Any], list[Any], int]:
        nodes_now = _workers()
        tags = [f"g{r}-{k}" for k in range(len(nodes_now))]
        refs = [
            _consume.options(name=CONSUME, scheduling_strategy=_soft(nid)).remote(
                tag, items, item_s, nodes_now[(k + 1) % len(nodes_now)]
            )
            for k, (tag, nid) in enumerate(zip(tags, nodes_now, strict=True))
        ]
        return tags, refs, items * len(tags)

    def borrows_of(r: int) -> tuple[list[Any], list[Any], int]:
        nodes_now = _workers()
        tags = [f"b{r}-{k}" for k in range(len(nodes_now))]
        refs = [
            _borrow.options(
                name=BORROW, scheduling_strategy=_soft(nodes_now[(k + 1) % len(nodes_now)])
            ).remote(
                [_create.options(name=CREATE, scheduling_strategy=_soft(nid)).remote(tag)],
                hold_s,
            )
            for k, (tag, nid) in enumerate(zip(tags, nodes_now, strict=True))
        ]
        return tags, refs, len(tags)

    whole = {"indices": list(range(items)), "bytes": items * ITEM_BYTES}
    plan: list[tuple[Submit, Judge, int, float]] = [
        (
            parents_of,
            lambda n, v: (
                1,
                None
                if v == _expected_parent(n, ANCHOR_WIDTH if n >= ANCHOR_IDS else width)
                else [n, v],
            ),
            IN_FLIGHT - 1,
            child_s,
        ),
        (calls_of, lambda ks, v: (1, None if v == ks[1] else [*ks, v]), 1, 0.0),
        (
            streams_of,
            lambda tag, got: (
                len(got["indices"]),
                None if got == whole else [tag, got["indices"], got["bytes"]],
            ),
            IN_FLIGHT,
            items * item_s / 2,
        ),
        (
            borrows_of,
            lambda tag, got: (
                1,
                None if got == {"tag": tag, "bytes": BORROWED_BYTES} else [tag, got],
            ),
            IN_FLIGHT,
            hold_s / 2,
        ),
    ]

    # The anchors: on each worker, one piece of work of each lane that holds until the host's
    # stop (a parent whose children hold on the next worker, a generator holding before its
    # last item read by a consumer on the previous one, a borrower holding an object whose
    # maker ran on the previous one), so a strike that takes any worker reaches every lane
    # whatever the rounds are doing — on a starved host the rounds came a few times a minute,
    # and a night's strikes found no nested task or generator on their nodes.
    anchor = (until_stop, log)
    anchored: dict[str, tuple[list[Any], list[Any]]] = {}
    ids = [ANCHOR_IDS + k for k in range(len(workers))]
    anchored["tasks"] = (
        ids,
        [
            _anchored_parent.options(
                name=PARENT, num_cpus=0, resources=LANE, scheduling_strategy=_soft(nid)
            ).remote(i, ANCHOR_WIDTH, workers[(k + 1) % len(workers)], anchor)
            for k, (i, nid) in enumerate(zip(ids, workers, strict=True))
        ],
    )
    tags = [f"anchor-{k}" for k in range(len(workers))]
    anchored["generator items"] = (
        tags,
        [
            _consume.options(name=CONSUME, scheduling_strategy=_soft(workers[k - 1])).remote(
                tag, items, item_s, nid, anchor
            )
            for k, (tag, nid) in enumerate(zip(tags, workers, strict=True))
        ],
    )
    anchored["borrowed objects"] = (
        tags,
        [
            _borrow.options(name=BORROW, scheduling_strategy=_soft(nid)).remote(
                [
                    _create.options(name=CREATE, scheduling_strategy=_soft(workers[k - 1])).remote(
                        tag
                    )
                ],
                hold_s,
                anchor,
            )
            for k, (tag, nid) in enumerate(zip(tags, workers, strict=True))
        ],
    )
    for lane, (keys, _) in anchored.items():
        sent[lane] += len(keys) * (items if lane == "generator items" else 1)
    # Every anchor holding before the host may strike (a parent, its children, a generator,
    # a borrower per worker); the set-up fails otherwise.
    expected = len(workers) * (3 + ANCHOR_WIDTH)
    holding = until(lambda: ray.get(log.holdings.remote()), lambda h: len(h) >= expected, 180)
    if len(holding) < expected:
        raise RuntimeError(f"{len(holding)} of {expected} anchors holding after 180 s: {holding}")

    def guarded(lane: str, submit: Submit, judge: Judge, depth: int, every_s: float) -> None:
        try:
            rounds(lane, submit, judge, depth, every_s)
        except Exception as exc:  # noqa: BLE001 - a lane that gives up is the verdict's data
            errors.append({"lane": lane, **describe(exc)})

    threads = [
        threading.Thread(target=guarded, args=(lane, *how), daemon=True)
        for lane, how in zip(lanes, plan, strict=True)
    ]
    for thread in threads:
        thread.start()
    # Where the actors were placed (the State API lags their start by a second or so).
    actor_nodes = until(lambda: [_actor_row(h)["node_id"] for h in handles], lambda ns: all(ns), 60)
    emit(
        "steady_running",
        actors=len(handles),
        actor_nodes=actor_nodes,
        workers=workers,
        anchors=[{**h, "node": name_of(h["node_id"])} for h in holding],
        parents=parents,
        width=width,
        items=items,
        item_s=item_s,
        hold_s=hold_s,
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
            ray.get(until_stop.stop.remote())
            stopped_at = time.time()
    judges = {lane: how[1] for lane, how in zip(lanes, plan, strict=True)}
    for lane, (keys, refs) in anchored.items():
        try:
            values = ray.get(refs, timeout=round_timeout_s)
        except Exception as exc:  # noqa: BLE001 - an anchor that gives up is the verdict's data
            errors.append({"lane": lane, "anchors": True, **describe(exc)})
            continue
        for key, value in zip(keys, values, strict=True):
            done, bad = judges[lane](key, value)
            counts[lane] += done
            if bad is not None:
                wrong[lane].append(bad)
    executed = ray.get(log.counts.remote())
    hits = {
        "tasks": {"parents": _attempts(PARENT), "children": _attempts(CHILD)},
        "actor calls": {"actors": [_actor_row(h) for h in handles]},
        "generator items": {"generators": _attempts(STREAM), "consumers": _attempts(CONSUME)},
        "borrowed objects": {
            "makers": _attempts(CREATE),
            "borrowers": _attempts(BORROW),
            "resubmitted": _resubmitted(CREATE),
        },
    }
    return {
        "sent": sent,
        "completed": counts,
        "wrong": wrong,
        "errors": errors,
        "executed": executed,
        "hits": hits,
        "anchors": [{**h, "node": name_of(h["node_id"])} for h in ray.get(log.holdings.remote())],
        "stopped_at": stopped_at,
    }
