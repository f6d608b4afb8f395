"""Scheduling workloads (claims SCHED-01..05, ADVICE-04): where tasks and actors land.

Every function connects with ``ray.init()`` (``RAY_ADDRESS=auto``), reports progress through
``raychaos_agent.emit`` and returns JSON-able data: per-node counts keyed by the harness's node
names, State API states, ``ray status`` text, and exceptions as ``{type, bases, message}``.
The small helpers here (``names_by_node_id``, ``describe_error``, ``ray_status`` ...) are shared
by the other workload modules.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from typing import Any

import ray
from raychaos_agent import emit, knobs, node_id, nodes, until

# -- shared helpers -------------------------------------------------------------------------


def connect(**init_kwargs: Any) -> None:
    if not ray.is_initialized():
        ray.init(**init_kwargs)


def names_by_node_id() -> dict[str, str]:
    """``{Ray node id: harness node name}`` for every node the GCS knows (alive or dead)."""
    by_ip = {info["ip"]: name for name, info in nodes().items()}
    out: dict[str, str] = {}
    for n in ray.nodes():
        name = by_ip.get(n["NodeManagerAddress"], n["NodeManagerAddress"])
        # A dead and a live id on one IP: the live one keeps the plain name.
        out[n["NodeID"]] = name if n["Alive"] else f"{name}(dead)"
    return out


def name_of(node: str, names: dict[str, str] | None = None) -> str:
    names = names or names_by_node_id()
    return names.get(node, node)


def counts_by_name(node_ids: list[str], include_all: bool = True) -> dict[str, int]:
    """Per-node counts keyed by node name; every alive node appears (0 when nothing landed)."""
    names = names_by_node_id()
    counts: Counter[str] = Counter(names.get(n, n) for n in node_ids)
    if include_all:
        for n in ray.nodes():
            if n["Alive"]:
                counts.setdefault(names[n["NodeID"]], 0)
    return dict(sorted(counts.items()))


def describe_error(exc: BaseException) -> dict[str, Any]:
    cause = getattr(exc, "cause", None)
    return {
        "type": type(exc).__name__,
        "bases": [c.__name__ for c in type(exc).__mro__[1:] if c is not object],
        "message": str(exc)[:1500],
        "cause": type(cause).__name__ if isinstance(cause, BaseException) else None,
    }


def ray_status(timeout: float = 30) -> str:
    """``ray status`` as this node sees it (the CLI talks to the GCS)."""
    try:
        out = subprocess.run(["ray", "status"], capture_output=True, text=True, timeout=timeout)
        return out.stdout + out.stderr
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        return f"(ray status failed: {exc!r})"


def pending_demands(status: str) -> list[str]:
    """The lines under ``Pending Demands:`` of ``ray status``."""
    lines = status.splitlines()
    out: list[str] = []
    grab = False
    for line in lines:
        if line.startswith("Pending Demands"):
            grab = True
            continue
        if grab:
            if not line.strip():
                break
            out.append(line.strip())
    return out


def awaited_demands(needle: str, timeout: float = 60.0) -> tuple[list[str], str]:
    """``ray status``'s Pending Demands, polled (bounded) until a line contains ``needle``.

    A demand reaches ``ray status`` through the raylets' periodic resource reports, and the CLI
    itself starts slowly on a loaded host: one snapshot taken right after the work became
    pending can still be empty (CI: OOM-02). Returns the last lines and output seen either way,
    so the experiment, not this helper, judges them.
    """
    status = until(
        ray_status, lambda s: any(needle in ln for ln in pending_demands(s)), timeout, period=1.0
    )
    return pending_demands(status), status


def available_cpu() -> tuple[float, float]:
    return ray.available_resources().get("CPU", 0.0), ray.cluster_resources().get("CPU", 0.0)


def wait_cpu_free(timeout: float = 60) -> dict[str, float]:
    """Wait (bounded) until available CPU equals total; return both and the seconds it took."""
    start = time.time()
    while True:
        avail, total = available_cpu()
        if avail >= total or time.time() - start > timeout:
            return {"available": avail, "total": total, "waited_s": round(time.time() - start, 2)}
        time.sleep(0.5)


def task_states(name: str, wait_s: float = 3.0, this_job: bool = True) -> list[dict[str, Any]]:
    """State API rows of tasks called ``name`` (polls ``wait_s`` for the ~1 s lag), by default
    only those of the calling driver's job."""
    from ray.util.state import list_tasks

    filters: list[Any] = [("name", "=", name)]
    if this_job:
        filters.append(("job_id", "=", ray.get_runtime_context().get_job_id()))
    deadline = time.time() + wait_s
    rows: list[Any] = []
    while True:
        rows = list_tasks(filters=filters, limit=1000, raise_on_missing_output=False)
        if rows or time.time() > deadline:
            break
        time.sleep(0.5)
    return [
        {
            "state": r.state,
            "node_id": r.node_id,
            "attempt": r.attempt_number,
            "error_type": getattr(r, "error_type", None),
        }
        for r in rows
    ]


def actor_states(class_name: str, wait_s: float = 3.0) -> list[dict[str, Any]]:
    from ray.util.state import list_actors

    deadline = time.time() + wait_s
    rows: list[Any] = []
    while True:
        rows = list_actors(
            filters=[("class_name", "=", class_name)],
            limit=1000,
            detail=True,
            raise_on_missing_output=False,
        )
        if rows or time.time() > deadline:
            break
        time.sleep(0.5)
    names = names_by_node_id()
    return [
        {
            "state": r.state,
            "node": names.get(r.node_id or "", r.node_id),
            "name": r.name,
            "death_cause": str(getattr(r, "death_cause", None))[:600]
            if getattr(r, "death_cause", None)
            else None,
        }
        for r in rows
    ]


# -- remote code ----------------------------------------------------------------------------


@ray.remote(num_cpus=1)
class Holder:
    """A 1-CPU actor that only reports where it is."""

    def where(self) -> str:
        return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1)
def hold_task(seconds: float) -> str:
    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id()


def _strategy(strategy: str) -> Any:
    return None if strategy == "DEFAULT" else strategy


def place(
    n: int,
    strategy: str = "DEFAULT",
    kind: str = "actor",
    hold_s: float = 3.0,
    num_cpus: float = 1,
    resources: dict[str, float] | None = None,
    one_by_one: bool = False,
) -> dict[str, Any]:
    """Place ``n`` 1-CPU actors (or tasks that hold their CPU ``hold_s``) all at once, or with
    ``one_by_one`` each actor only after the previous one answered.

    One by one isolates the policy from the raylets' resource reports: the submitting raylet
    decides on a view of the other nodes that lags their allocations, and six actors
    submitted at once on a loaded host (CI, load 30+) once landed 2/1/3 instead of 2/2/2.
    Returns per-node counts keyed by node name, the submitting node, and the knobs seen.
    Actors are killed and CPUs awaited before returning.
    """
    connect()
    driver = name_of(node_id())
    emit("driver_connected", driver_node=driver, knobs=knobs())
    opts: dict[str, Any] = {"num_cpus": num_cpus}
    if resources:
        opts["resources"] = resources
    if strategy != "DEFAULT":
        opts["scheduling_strategy"] = _strategy(strategy)
    started = time.time()
    if kind == "actor":
        actors, where = [], []
        for _ in range(n if one_by_one else 1):
            batch = [Holder.options(**opts).remote() for _ in range(1 if one_by_one else n)]
            where += ray.get([a.where.remote() for a in batch], timeout=120)
            actors += batch
        status = ray_status()
        for a in actors:
            ray.kill(a)
    else:
        where = ray.get([hold_task.options(**opts).remote(hold_s) for _ in range(n)], timeout=300)
        status = ""
    counts = counts_by_name(where)
    emit("placed", n=n, strategy=strategy, kind=kind, counts=counts)
    names = names_by_node_id()
    cpu_nodes = {
        names[x["NodeID"]] for x in ray.nodes() if x["Alive"] and x["Resources"].get("CPU", 0) > 0
    }
    eligible = [c for k, c in counts.items() if k in cpu_nodes] or [0]
    free = wait_cpu_free()
    return {
        "n": n,
        "strategy": strategy,
        "kind": kind,
        "driver_node": driver,
        "counts": counts,
        "spread": max(eligible) - min(eligible),  # over nodes with CPUs
        "seconds": round(time.time() - started, 2),
        "cpu_after": free,
        "ray_status": status,
    }


def place_series(
    ns: list[int],
    strategy: str = "DEFAULT",
    kind: str = "actor",
    hold_s: float = 3.0,
    one_by_one: bool = False,
) -> list[dict[str, Any]]:
    """:func:`place` for each ``n`` in turn (each starts from an idle cluster)."""
    out = []
    for n in ns:
        r = place(n, strategy=strategy, kind=kind, hold_s=hold_s, one_by_one=one_by_one)
        r.pop("ray_status", None)
        out.append(r)
    return out


@ray.remote
class Claimer:
    def where(self) -> str:
        return ray.get_runtime_context().get_node_id()


def only_head_resource(
    resource: str = "special", n: int = 3, use_node_ip: bool = False, pending_wait_s: float = 5.0
) -> dict[str, Any]:
    """SCHED-04: ``n`` actors each needing 1 ``resource`` (or ``node:<head ip>``) that only the
    head has, in amount 1. One lands on the head; the rest stay PENDING_CREATION until it is
    killed, then the next lands on the head too.
    """
    connect()
    head_ip = nodes()["head"]["ip"]
    res = {f"node:{head_ip}": 1.0} if use_node_ip else {resource: 1.0}
    total = ray.cluster_resources().get(next(iter(res)), 0)
    emit("driver_connected", resources=res, total=total)
    actors = [Claimer.options(resources=res, num_cpus=0).remote() for _ in range(n)]
    refs = [a.where.remote() for a in actors]
    # The one that fits starts within the worker start-up time (slow on a loaded host); the
    # rest must still be pending ``pending_wait_s`` later.
    ready, not_ready = ray.wait(refs, num_returns=max(int(total), 1), timeout=60)
    if not_ready:
        more, not_ready = ray.wait(not_ready, num_returns=len(not_ready), timeout=pending_wait_s)
        ready += more
    first = [name_of(ray.get(r)) for r in ready]
    states = actor_states("Claimer")
    demands, status = awaited_demands(f"{{'{next(iter(res))}': 1.0}}")
    emit("first_wave", ready=len(ready), pending=len(not_ready))
    # Free the one(s) placed; the next must land on the head too.
    for a, r in zip(actors, refs, strict=True):
        if r in ready:
            ray.kill(a)
    second_ready, _ = ray.wait(
        not_ready, num_returns=min(len(not_ready), int(total) or 1), timeout=30
    )
    second = [name_of(ray.get(r)) for r in second_ready]
    for a in actors:
        ray.kill(a)
    return {
        "resources": res,
        "total_in_cluster": total,
        "first_wave_nodes": first,
        "pending_after_s": pending_wait_s,
        "pending_count": len(not_ready),
        "actor_states": sorted(s["state"] for s in states),
        "second_wave_nodes": second,
        "pending_demands": demands,
        "ray_status": status,
    }


def tasks_on_head_resource(
    resource: str = "special", n: int = 4, hold_s: float = 2.0
) -> dict[str, Any]:
    """SCHED-04 with tasks: ``n`` tasks needing 1 ``resource`` run one at a time on the head."""
    connect()
    started = time.time()
    refs = [hold_task.options(num_cpus=0, resources={resource: 1}).remote(hold_s) for _ in range(n)]
    # Sample the State API (it lags ~1 s) while the later tasks should wait for the unit.
    states = until(
        lambda: sorted(s["state"] for s in task_states("hold_task")),
        lambda states: "PENDING_NODE_ASSIGNMENT" in states,
        n * hold_s,
    )
    where = ray.get(refs, timeout=120)
    return {
        "counts": counts_by_name(where),
        "states_while_serial": states,
        "seconds": round(time.time() - started, 2),
        "serial_bound_s": n * hold_s,
    }


def affinity_to_dead(
    node_name: str = "worker-2", wait_dead_s: float = 90, use_fake_id: bool = False
) -> dict[str, Any]:
    """SCHED-05: NodeAffinity to the node ``target`` after it died (or to a made-up id).

    Waits (bounded) until the GCS marks ``node_name`` dead, then tries a task and an actor with
    ``soft=False`` and ``soft=True``.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    connect()
    target = node_name
    ip = nodes()[target]["ip"]
    started = time.time()
    dead_id = None
    if use_fake_id:
        dead_id = "ab" * 28
    while dead_id is None and time.time() - started < wait_dead_s:
        on_ip = [n for n in ray.nodes() if n["NodeManagerAddress"] == ip]
        if on_ip and not any(n["Alive"] for n in on_ip):
            dead_id = on_ip[0]["NodeID"]
            break
        time.sleep(0.5)
    if dead_id is None:
        raise TimeoutError(f"{target} ({ip}) not dead in the GCS after {wait_dead_s} s")
    emit("target_dead", node=target, node_id=dead_id, after_s=round(time.time() - started, 2))
    out: dict[str, Any] = {"dead_node_id": dead_id, "fake": use_fake_id}
    for soft in (False, True):
        strat = NodeAffinitySchedulingStrategy(node_id=dead_id, soft=soft)
        t0 = time.time()
        try:
            where = ray.get(hold_task.options(scheduling_strategy=strat).remote(0.1), timeout=60)
            out[f"task_soft={soft}"] = {"ok": True, "node": name_of(where)}
        except Exception as exc:  # noqa: BLE001 - outcome under test
            out[f"task_soft={soft}"] = {"ok": False, "error": describe_error(exc)}
        out[f"task_soft={soft}"]["seconds"] = round(time.time() - t0, 2)
        t0 = time.time()
        actor = Holder.options(scheduling_strategy=strat).remote()
        try:
            where = ray.get(actor.where.remote(), timeout=60)
            out[f"actor_soft={soft}"] = {"ok": True, "node": name_of(where)}
        except Exception as exc:  # noqa: BLE001
            out[f"actor_soft={soft}"] = {"ok": False, "error": describe_error(exc)}
        out[f"actor_soft={soft}"]["seconds"] = round(time.time() - t0, 2)
        ray.kill(actor)
    return out
