"""Object fault-tolerance workloads (claims OBJ-01 … OBJ-06).

Convention (as in ``workloads.tasks``): the Ray exception under test is caught and returned as
``describe(exc)`` inside the result dict; the workload raises only on set-up problems.

Objects are kept off other nodes: producers are pinned with ``pin()`` and the driver only ever
``ray.wait(..., fetch_local=False)``s until the loss has happened, so the only copy lives where
the host will strike. Reads after the loss go through the driver (``ray.get``) and/or a
dependent task on another node, as the arguments say.

Host pattern for every workload here: wait for the event named in the docstring (its fields
``node_id``/``node_name`` say where the copy lives), kill that node's container (or raylet),
and let the workload detect the death itself (it polls ``ray.nodes()``).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import ray
from raychaos_agent import emit, node_id, node_id_of, pin, until

from workloads.tasks import (
    _token,
    connect,
    describe,
    make_tally,
    name_of,
    owner_log,
    task_attempts,
    wait_node_dead,
)

MB = 1024 * 1024


@ray.remote(num_cpus=1)
def _produce(tally: Any, key: str, size_mb: float, pad: bytes = b"") -> Any:
    """A plasma-sized output (> 100 KiB); every execution is counted by the tally."""
    ray.get(tally.hit.remote(key, node_id(), os.getpid()))
    return bytes([7]) * int(size_mb * MB)


@ray.remote(num_cpus=1)
def _consume(x: Any) -> dict[str, Any]:
    return {"nbytes": len(x), "node_id": node_id()}


def _read(ref: Any, read_via: str, reader: str, get_timeout_s: float) -> dict[str, Any]:
    """Read ``ref`` after a loss: by a dependent task on ``reader`` and/or by the driver."""
    out: dict[str, Any] = {}
    if read_via in ("task", "both"):
        try:
            out["task_value"] = ray.get(
                _consume.options(scheduling_strategy=pin(reader, soft=True)).remote(ref),
                timeout=get_timeout_s,
            )
            out["task_error"] = None
        except ray.exceptions.GetTimeoutError as exc:
            out["task_error"] = describe(exc)
        except Exception as exc:  # noqa: BLE001
            out["task_error"] = describe(exc)
        out["t_task_outcome"] = time.time()
    if read_via in ("driver", "both"):
        try:
            value = ray.get(ref, timeout=get_timeout_s)
            out["driver_value"] = {"nbytes": len(value)}
            out["driver_error"] = None
        except ray.exceptions.GetTimeoutError as exc:
            out["driver_error"] = describe(exc)
        except Exception as exc:  # noqa: BLE001
            out["driver_error"] = describe(exc)
        out["t_driver_outcome"] = time.time()
    emit(
        "read_done",
        **{
            k: (v["type"] if isinstance(v, dict) and "type" in v else v)
            for k, v in out.items()
            if k.endswith("error")
        },
    )
    return out


def _wait_executions(tally: Any, key: str, count: int, wait_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    while True:
        hits = ray.get(tally.get.remote(key))
        if len(hits) >= count or time.monotonic() > deadline:
            return hits
        time.sleep(0.2)


def lineage_reconstruction(
    on: str = "worker-1",
    max_retries: int | None = None,
    losses: int = 1,
    size_mb: float = 4,
    read_via: str = "driver",
    reader: str = "worker-2",
    get_timeout_s: float = 90.0,
) -> dict[str, Any]:
    """OBJ-01 (retries left), OBJ-02 (``max_retries=0``), OBJ-03 (``losses`` > budget).

    A producer soft-pinned to ``on`` returns ``size_mb`` MiB (plasma). The driver only
    waits with ``fetch_local=False``. For each loss round r = 0 … ``losses``-1 the workload emits
    ``object_ready`` (fields ``round``, ``node_id``, ``node_name`` of the node holding the
    only copy) — HOST: kill that node — then polls ``ray.nodes()`` until it is dead
    (``node_dead_seen``) and, before the last round, waits up to 40 s for an eager
    re-execution of the producer (counted by an actor on the driver node). Finally it reads the
    object via ``read_via`` ("driver", "task" on ``reader``, or "both").

    ``max_retries=None`` leaves Ray's default (or ``RAY_TASK_MAX_RETRIES``). Returns
    ``executions`` (producer runs, one per reconstruction + 1), ``rounds`` (timings, where
    each copy lived), the read outcomes (``driver_error``/``task_error`` as ``describe``), the
    State API ``attempts``.
    """
    connect()
    tally = make_tally()
    key = _token("obj")
    opts: dict[str, Any] = {"name": key, "scheduling_strategy": pin(on, soft=True)}
    if max_retries is not None:
        opts["max_retries"] = max_retries
    ref = _produce.options(**opts).remote(tally, key, size_mb)
    ready, _ = ray.wait([ref], fetch_local=False, timeout=120)
    if not ready:
        raise RuntimeError(f"producer {key} did not finish on {on}")
    rounds: list[dict[str, Any]] = []
    for r in range(losses):
        hits = _wait_executions(tally, key, r + 1, 40)
        if len(hits) < r + 1:
            rounds.append(
                {"round": r, "reconstructed": False, "note": "no re-execution within 40 s"}
            )
            break
        where = hits[-1]["node_id"]
        if r > 0:
            ready, _ = ray.wait([ref], fetch_local=False, timeout=40)
            if not ready:
                rounds.append({"round": r, "reconstructed": True, "object_ready": False})
        info = {"round": r, "node_id": where, "node_name": name_of(where), "t_ready": time.time()}
        emit("object_ready", **info)
        dead = wait_node_dead(where, wait_s=90)
        info.update({"t_dead_seen": dead["t_dead_seen"], "dead": dead["dead"]})
        rounds.append(info)
        if not dead["dead"]:
            raise RuntimeError(f"node {info['node_name']} holding {key} never died")
    if losses > 1:
        # Give the last loss a moment to trigger (or not) an eager re-execution.
        _wait_executions(tally, key, losses + 1, 10)
    out: dict[str, Any] = {
        "name": key,
        "max_retries": max_retries,
        "losses": losses,
        "rounds": rounds,
    }
    out.update(_read(ref, read_via, reader, get_timeout_s))
    hits = ray.get(tally.get.remote(key))
    out["executions"] = len(hits)
    out["execution_nodes"] = [name_of(h["node_id"]) or h["node_id"] for h in hits]
    out["attempts"] = task_attempts(key, expect=len(hits), wait_s=8)
    return out


def _locations(ref: Any) -> list[str]:
    """The node ids the owner's object directory lists for ``ref`` (plasma copies).

    ``ray.experimental.get_object_locations`` (exported in ``ray.experimental.__all__`` in
    every release read, 2.50.1 to 2.60.0) asks the owner, which records a node when its raylet
    reports the copy added, and drops it when the copy is evicted or the node dies.
    """
    from ray.experimental import get_object_locations

    return sorted(get_object_locations([ref], timeout_ms=5000).get(ref, {}).get("node_ids", []))


def put_secondary_copy(
    copy_on: str = "worker-1",
    read_on: str = "worker-2",
    size_mb: float = 4,
    locate_s: float = 30.0,
) -> dict[str, Any]:
    """OBJ-04: ``ray.put`` in the driver (primary copy pinned on the driver node); a task on
    ``copy_on`` reads it, making a secondary copy there. Before the strike the owner must list
    both copies (``locations_before``: the driver node and ``copy_on``, polled up to
    ``locate_s``: the copy's node reports it asynchronously); a copy never listed is a set-up
    failure (raises). Emits ``secondary_copy`` (fields ``node_id``, ``node_name``,
    ``locations``) — HOST: kill ``copy_on``. After the death is seen, a task on ``read_on`` and
    the driver read the object. Expected: both succeed. ``locations_after``: what the owner
    lists then (``copy_on`` gone once the death is processed).
    """
    me = connect()
    ref = ray.put(bytes([3]) * int(size_mb * MB))
    first = ray.get(_consume.options(scheduling_strategy=pin(copy_on)).remote(ref), timeout=120)
    both = sorted({me, first["node_id"]})
    seen = until(lambda: _locations(ref), lambda ids: set(both) <= set(ids), locate_s)
    if not set(both) <= set(seen):
        raise RuntimeError(f"the owner never listed the copy on {copy_on}: {seen}, want {both}")
    emit(
        "secondary_copy",
        node_id=first["node_id"],
        node_name=name_of(first["node_id"]),
        locations=seen,
    )
    dead = wait_node_dead(first["node_id"], wait_s=90)
    out: dict[str, Any] = {
        "copy": first,
        "driver_node_id": me,
        "locations_before": seen,
        "t_dead_seen": dead["t_dead_seen"],
    }
    out.update(_read(ref, "both", read_on, 60))
    out["locations_after"] = _locations(ref)
    return out


@ray.remote(num_cpus=0, max_restarts=0)
class Owner:
    """Owns objects it creates with ``ray.put`` or by submitting a task."""

    def make(
        self, size_mb: float, via: str, producer_node_id: str | None, tally: Any = None
    ) -> list[Any]:
        # Only the driver knows raychaos node names (RAYCHAOS_NODES): take Ray node ids here.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if via == "put":
            ref = ray.put(bytes([5]) * int(size_mb * MB))
        else:
            strategy: Any = (
                NodeAffinitySchedulingStrategy(producer_node_id, soft=False)
                if producer_node_id
                else "DEFAULT"
            )
            ref = _produce.options(scheduling_strategy=strategy).remote(tally, "owned", size_mb)
            ray.wait([ref], fetch_local=False, timeout=120)
        return [ref]  # nested: the caller becomes a borrower

    def where(self) -> dict[str, Any]:
        return {"node_id": node_id(), "pid": os.getpid()}


def owner_died(
    owner_on: str = "worker-1",
    via: str = "put",
    producer_on: str | None = "worker-2",
    kill: str = "ray.kill",
    read_on: str = "worker-2",
    size_mb: float = 4,
    get_timeout_s: float = 60.0,
) -> dict[str, Any]:
    """OBJ-05: an actor on ``owner_on`` creates an object (``via`` "put": ``ray.put`` in the
    actor, copy on ``owner_on``; "task": a task pinned to ``producer_on``, so the value survives
    elsewhere) and hands the ref to the driver (a borrower). Then the owner dies:

    * ``kill="ray.kill"``: the workload kills the owner actor itself (no host step);
    * ``kill="host"``: emits ``owner_ready`` (``node_id``, ``node_name``, ``pid``) — HOST: kill
      that pid (``kill -9``) or the node; the workload waits until the owner is unreachable.

    Then a task on ``read_on`` and the driver read the object, each bounded by
    ``get_timeout_s``. Expected: ``OwnerDiedError``.
    """
    connect()
    owner = Owner.options(scheduling_strategy=pin(owner_on)).remote()
    where = ray.get(owner.where.remote(), timeout=60)
    producer_id = node_id_of(producer_on) if producer_on else None
    [ref] = ray.get(owner.make.remote(size_mb, via, producer_id, make_tally()), timeout=120)
    ready, _ = ray.wait([ref], fetch_local=False, timeout=60)
    out: dict[str, Any] = {
        "owner": {**where, "node_name": name_of(where["node_id"])},
        "via": via,
        "kill": kill,
        "object_ready": bool(ready),
    }
    if kill == "ray.kill":
        ray.kill(owner)
        out["t_owner_killed"] = time.time()
    else:
        emit(
            "owner_ready",
            node_id=where["node_id"],
            node_name=name_of(where["node_id"]),
            pid=where["pid"],
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            ray.get(owner.where.remote(), timeout=5)
        except Exception as exc:  # noqa: BLE001 - the owner is gone
            out["owner_error"] = describe(exc)
            break
        time.sleep(0.2)
    out["t_owner_dead_seen"] = time.time()
    emit("owner_dead_seen")
    out.update(_read(ref, "both", read_on, get_timeout_s))
    return out


#: The owner's core-worker log lines around lineage eviction (src/ray/core_worker/
#: task_manager.cc, CompletePendingTask), in every release read (2.50.1 to 2.60.0).
_EXCEEDS = re.compile(
    r"Total lineage size is ([-0-9.e+]+)MB, which exceeds the limit of ([-0-9.e+]+)MB"
)
_EVICTED = re.compile(r"Evicted ([-0-9.e+]+)MB of task lineage")


def _lineage_log() -> dict[str, Any]:
    """What the owner logged about lineage eviction: each budget overrun (total and limit,
    bytes, as printed in MB with 6 significant digits) and each eviction's bytes."""
    path = owner_log()
    if path is None:
        return {"path": None, "exceeded": [], "evicted": []}
    with open(path, errors="replace") as log:
        text = log.read()
    return {
        "path": path,
        "exceeded": [
            {"total": round(float(t) * 1e6), "limit": round(float(m) * 1e6)}
            for t, m in _EXCEEDS.findall(text)
        ],
        "evicted": [round(float(b) * 1e6) for b in _EVICTED.findall(text)],
    }


def lineage_evicted(
    on: str = "worker-1",
    count: int = 7,
    pad_kb: int = 20,
    size_mb: float = 2,
    max_retries: int = 3,
    get_timeout_s: float = 60.0,
    log_wait_s: float = 15.0,
) -> dict[str, Any]:
    """OBJ-06: ``count`` producers soft-pinned to ``on``, each with a ``pad_kb`` KiB inline
    argument so each task spec (its lineage) weighs a little over ``pad_kb`` KiB. Run the
    cluster with ``RAY_max_lineage_bytes`` below ``count * pad_kb`` KiB (e.g. 100000).

    The producers run **one at a time**: each is submitted once the previous one finished and
    the owner processed its completion (an actor round trip after ``ray.wait``: the owner
    handles replies on one event loop, in order), so every budget check and eviction happens
    at a known completion with no task pending. Ray checks the budget when a retryable task
    finishes and then evicts the oldest lineage (the owner's FIFO of reconstructable objects).

    Emits ``object_ready`` (``node_id``, ``node_name``) when all outputs sit on ``on`` — HOST:
    kill it. Then each object is read by the driver, oldest first. Returns per-object
    outcome (``error`` as class, bases and ``reason``) and executions; ``lineage_log``: what
    the owner's log says about the budget (``exceeded``: total and limit in bytes;
    ``evicted``: bytes Ray reports evicting), polled up to ``log_wait_s``; and
    ``overruns_after_completion``: how many overruns the log held after each completion (the
    owner writes these lines at once: seen on 2.50.1 and 2.60.0 right after the completion).
    """
    connect()
    tally = make_tally()
    pad = os.urandom(pad_kb * 1024)
    keys = [_token(f"lin{i}") for i in range(count)]
    refs = []
    overruns: list[int] = []
    for k in keys:
        ref = _produce.options(
            name=k, max_retries=max_retries, scheduling_strategy=pin(on, soft=True)
        ).remote(tally, k, size_mb, pad)
        ready, _ = ray.wait([ref], fetch_local=False, timeout=120)
        if not ready:
            raise RuntimeError(f"producer {k} did not finish")
        refs.append(ref)
        ray.get(tally.get.remote(k))  # after the owner's completion handler: see docstring
        overruns.append(len(_lineage_log()["exceeded"]))
    wheres = {ray.get(tally.get.remote(k))[0]["node_id"] for k in keys}
    if len(wheres) != 1:
        raise RuntimeError(f"outputs spread over several nodes: {wheres}")
    where = wheres.pop()
    emit("object_ready", node_id=where, node_name=name_of(where))
    dead = wait_node_dead(where, wait_s=90)
    lineage_cap = os.environ.get("RAY_max_lineage_bytes")  # noqa: SIM112 - Ray's spelling
    out: dict[str, Any] = {
        "t_dead_seen": dead["t_dead_seen"],
        "objects": [],
        "RAY_max_lineage_bytes": lineage_cap,
        "pad_bytes": len(pad),
        "overruns_after_completion": overruns,
    }
    for i, (k, ref) in enumerate(zip(keys, refs, strict=True)):
        row: dict[str, Any] = {"index": i}
        try:
            value = ray.get(ref, timeout=get_timeout_s)
            row["ok"] = len(value)
            row["error"] = None
        except Exception as exc:  # noqa: BLE001
            err = describe(exc)
            row["error"] = {k2: err.get(k2) for k2 in ("type", "bases", "reason")}
            row["message_head"] = err["message"][-300:]
        row["executions"] = len(ray.get(tally.get.remote(k)))
        out["objects"].append(row)
    out["lineage_log"] = until(_lineage_log, lambda seen: bool(seen["exceeded"]), log_wait_s)
    return out
