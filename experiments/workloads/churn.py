"""Steady-state work under a seeded killer (CHURN-01/02/09/10), as Ray's nightly chaos tests
keep running it: nested retried tasks, restartable actors with sequence numbers, streaming
generators and borrowed objects, each lane judged exactly by the host; and the driver an
``rpc_failure`` strike starts (``rpc_probe``).

Exceptions under test come back as data (``describe``), as in ``workloads.tasks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import ray
from raychaos_agent import (
    SIGNALS,
    emit,
    node_id,
    nodes,
    pin,
    until,
)

from workloads.lanes import attempts, resubmitted
from workloads.preemption import actor_row, affinity
from workloads.tasks import (
    connect,
    describe,
    name_of,
)

# --------------------------------------------------------------------------------------------
# CHURN-01 / 02 / 09 / 10: steady-state work under a seeded killer (Ray's nightly chaos tests)
# --------------------------------------------------------------------------------------------

#: The State API names of the steady workload's tasks, so each lane's attempts are counted from
#: Ray's own records: an attempt number above 0 is a retry, or a rebuild when the attempt
#: before it had finished (lineage reconstruction resubmits a finished task).
PARENT, CHILD = "steady-parent", "steady-child"
CONSUME, STREAM = "steady-consume", "steady-stream"
CREATE, BORROW = "steady-create", "steady-borrow"


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
    return affinity(nid, True) if nid else "DEFAULT"


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
    actor_nodes = until(lambda: [actor_row(h)["node_id"] for h in handles], lambda ns: all(ns), 60)
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
        "tasks": {"parents": attempts(PARENT), "children": attempts(CHILD)},
        "actor calls": {"actors": [actor_row(h) for h in handles]},
        "generator items": {"generators": attempts(STREAM), "consumers": attempts(CONSUME)},
        "borrowed objects": {
            "makers": attempts(CREATE),
            "borrowers": attempts(BORROW),
            "resubmitted": resubmitted(CREATE),
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
