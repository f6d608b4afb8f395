"""Multi-tenancy workloads (claims TENANT-01..05, ADVICE-03).

Tenants are separate drivers: the host starts several workloads (each its own job) and
coordinates them through their events (``created``, ``b_ready``). The Jobs API entrypoint of
TENANT-05 is this module run as a script: ``python -m workloads.tenancy job-entry N SECONDS``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import ray
from raychaos_agent import emit, node_ip, nodes, until, wait_signal

from workloads.scheduling import (
    actor_states,
    awaited_demands,
    connect,
    describe_error,
    name_of,
    task_states,
    wait_cpu_free,
)
from workloads.store import memory_stats


@ray.remote(num_cpus=0)
class Named:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def tag_of(self) -> str:
        return self.tag


# -- TENANT-01 ------------------------------------------------------------------------------


def named_actor_hold(
    name: str, namespace: str, hold_s: float = 30.0, release: str | None = None
) -> dict[str, Any]:
    """Tenant A: create actor ``name`` in ``namespace`` and keep the job alive ``hold_s``
    (or, with ``release``, until the host raises that signal, at most ``hold_s``)."""
    connect(namespace=namespace)
    actor = Named.options(name=name).remote(f"{namespace}/A")
    ray.get(actor.tag_of.remote(), timeout=60)
    emit("created", name=name, namespace=namespace)
    if release:
        wait_signal(release, timeout=hold_s)
    else:
        time.sleep(hold_s)
    return {"namespace": ray.get_runtime_context().namespace, "tag": ray.get(actor.tag_of.remote())}


def named_actor_probe(name: str, namespace: str) -> dict[str, Any]:
    """Tenant B: look up ``name`` in ``namespace``, then try to create an actor of that name."""
    connect(namespace=namespace)
    out: dict[str, Any] = {"namespace": ray.get_runtime_context().namespace}
    try:
        found = ray.get_actor(name)
        out["get_actor"] = {"found": True, "tag": ray.get(found.tag_of.remote(), timeout=30)}
    except Exception as exc:  # noqa: BLE001 - outcome under test
        out["get_actor"] = {"found": False, "error": describe_error(exc)}
    try:
        mine = Named.options(name=name).remote(f"{namespace}/B")
        out["create"] = {"ok": True, "tag": ray.get(mine.tag_of.remote(), timeout=30)}
    except Exception as exc:  # noqa: BLE001
        out["create"] = {"ok": False, "error": describe_error(exc)}
    try:
        from ray.util import list_named_actors

        out["list_named_actors(all_namespaces=True)"] = sorted(
            f"{a['namespace']}/{a['name']}" for a in list_named_actors(all_namespaces=True)
        )
    except Exception as exc:  # noqa: BLE001
        out["list_named_actors"] = describe_error(exc)
    return out


# -- TENANT-02 ------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
class Tenant:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def leave_actors(namespace: str = "t2") -> dict[str, Any]:
    """Driver 1: a non-detached and a detached 1-CPU actor, then the driver exits."""
    connect(namespace=namespace)
    plain = Tenant.options(name="plain").remote()
    keeper = Tenant.options(name="keeper", lifetime="detached").remote()
    where = ray.get([plain.node.remote(), keeper.node.remote()], timeout=60)
    avail = ray.available_resources().get("CPU")
    emit("actors_up", plain=name_of(where[0]), keeper=name_of(where[1]), cpu_available=avail)
    return {
        "plain_node": name_of(where[0]),
        "keeper_node": name_of(where[1]),
        "cpu_available": avail,
        "cpu_total": ray.cluster_resources().get("CPU"),
    }


def after_driver_exit(namespace: str = "t2", wait_s: float = 30.0) -> dict[str, Any]:
    """Driver 2: the first driver's non-detached actor is DEAD, the detached one ALIVE and
    holding its CPU until ``ray.kill``."""
    connect(namespace=namespace)
    t0 = time.time()
    states: list[dict[str, Any]] = []
    while time.time() - t0 < wait_s:
        states = actor_states("Tenant")
        if any(s["name"] == "plain" and s["state"] == "DEAD" for s in states):
            break
        time.sleep(0.5)
    plain_dead_after = round(time.time() - t0, 2)
    # The dead actor's CPU comes back with the next resource report: wait (bounded) for at
    # least that much, so a detached actor that also let go shows as all CPU free.
    avail, total = until(
        lambda: (
            ray.available_resources().get("CPU", 0.0),
            ray.cluster_resources().get("CPU", 0.0),
        ),
        lambda cpu: cpu[0] >= cpu[1] - 1,
        wait_s,
    )
    try:
        keeper = ray.get_actor("keeper")
        keeper_alive = name_of(ray.get(keeper.node.remote(), timeout=30))
    except Exception as exc:  # noqa: BLE001
        keeper, keeper_alive = None, describe_error(exc)
    try:
        ray.get_actor("plain")
        plain_lookup: Any = "found"
    except Exception as exc:  # noqa: BLE001
        plain_lookup = describe_error(exc)["type"]
    if keeper is not None:
        ray.kill(keeper)
    freed = wait_cpu_free(30)
    return {
        "states": states,
        "plain_dead_within_s": plain_dead_after,
        "cpu_available_before_kill": avail,
        "cpu_total": total,
        "keeper_alive_on": keeper_alive,
        "plain_lookup": plain_lookup,
        "after_kill": freed,
        "states_after_kill": actor_states("Tenant"),
    }


# -- TENANT-03 ------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
def sleeper(seconds: float) -> str:
    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1)
class InPg:
    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def pg_reservation(
    wait_s: float = 8.0, retriable: bool = True, retriable_wait_s: float = 30.0
) -> dict[str, Any]:
    """A placement group reserving every CPU blocks other work until removed; removal kills
    the actor and the task running inside it.

    ``retriable``: also run an in-PG task with default retries and wait ``retriable_wait_s``
    for its outcome after the removal (FINDING: it is retried into the removed PG and hangs).
    """
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    connect()
    total = ray.cluster_resources().get("CPU", 0)
    per_node = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]]
    bundles = [{"CPU": c} for c in per_node if c > 0]
    pg = placement_group(bundles, strategy="SPREAD")
    ray.get(pg.ready(), timeout=60)
    in_pg = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0)
    actor = InPg.options(scheduling_strategy=in_pg).remote()
    ray.get(actor.node.remote(), timeout=60)
    inside_task = sleeper.options(scheduling_strategy=in_pg, max_retries=0).remote(120)
    inside_retriable = (
        sleeper.options(scheduling_strategy=in_pg, name="sleeper_retriable").remote(120)
        if retriable
        else None
    )
    outside = sleeper.remote(0.1)
    ready, _ = ray.wait([outside], timeout=wait_s)
    out: dict[str, Any] = {
        "bundles": bundles,
        "cpu_total": total,
        "cpu_available_with_pg": ray.available_resources().get("CPU", 0),
        "outside_ran_while_pg": bool(ready),
        "outside_states": [s["state"] for s in task_states("sleeper")],
        "pending_demands": awaited_demands("{'CPU': 1.0}")[0],
    }
    emit("pg_blocking", **{k: out[k] for k in ("outside_ran_while_pg", "outside_states")})
    t0 = time.time()
    remove_placement_group(pg)
    try:
        ray.get(outside, timeout=60)
        out["outside_after_remove_s"] = round(time.time() - t0, 2)
    except Exception as exc:  # noqa: BLE001
        out["outside_after_remove"] = describe_error(exc)
    checks = [
        ("actor_call", actor.node.remote(), 30.0),
        ("inside_task max_retries=0", inside_task, 30.0),
    ]
    if inside_retriable is not None:
        checks.append(("inside_task default retries", inside_retriable, retriable_wait_s))
    for label, ref, bound in checks:
        t1 = time.time()
        try:
            ray.get(ref, timeout=bound)
            out[label] = {"ok": True}
        except Exception as exc:  # noqa: BLE001 - outcome under test
            out[label] = {"ok": False, "error": describe_error(exc)}
        out[label]["seconds"] = round(time.time() - t1, 2)
    out["actor_states"] = actor_states("InPg")
    out["inside_task_states"] = {
        "max_retries=0": task_states("sleeper"),
        "retriable": task_states("sleeper_retriable") if inside_retriable is not None else [],
    }
    if inside_retriable is not None:
        # What the pending retry holds, seen before it is cancelled: nothing, if it waits for
        # the removed group's resources rather than for CPUs someone else keeps busy.
        out["while_retry_pending"] = {
            "cpu": wait_cpu_free(10),
            "pg_resources": sorted(k for k in ray.available_resources() if "_group_" in k),
        }
        ray.cancel(inside_retriable, force=True)
    out["after"] = wait_cpu_free(60)
    out["pg_resources_left"] = sorted(k for k in ray.available_resources() if "_group_" in k)
    return out


# -- TENANT-04 ------------------------------------------------------------------------------


def spill_report(refs: list[Any]) -> list[dict[str, Any]]:
    """Per object, as its owner (this driver) records it: the job that created it, whether
    it was ever spilled, and the nodes whose store holds it now."""
    from ray.experimental import get_object_locations

    where = get_object_locations(refs, timeout_ms=30_000)
    return [
        {
            "object_id": ref.hex(),
            "job_id": ref.job_id().hex(),
            "did_spill": bool(where.get(ref, {}).get("did_spill")),
            "in_store_on": list(where.get(ref, {}).get("node_ids") or []),
            "size": where.get(ref, {}).get("object_size"),
        }
        for ref in refs
    ]


@ray.remote(num_cpus=0)
def checksum(arr: Any) -> int:
    return sum(arr[::4096])


def store_tenant_b(n_objs: int = 3, size_mb: int = 10, duration_s: float = 40.0) -> dict[str, Any]:
    """Tenant B: puts a few objects, then keeps reading them with tasks every second."""
    connect(namespace="tenant-b")
    refs = [ray.put(bytes([i + 1]) * (size_mb * 1024 * 1024)) for i in range(n_objs)]
    expect = [int(ray.get(checksum.remote(r), timeout=60)) for r in refs]
    emit("b_ready", n=n_objs, size_mb=size_mb)
    rounds, failures = 0, []
    t0 = time.time()
    latencies = []
    while time.time() - t0 < duration_s:
        t1 = time.time()
        try:
            got = ray.get([checksum.remote(r) for r in refs], timeout=60)
            if got != expect:
                failures.append({"round": rounds, "got": got, "expect": expect})
        except Exception as exc:  # noqa: BLE001 - outcome under test
            failures.append({"round": rounds, "error": describe_error(exc)})
        latencies.append(round(time.time() - t1, 3))
        rounds += 1
        time.sleep(1.0)
    # The owner's report first, then the raylets' count: the count then covers the report.
    objects = spill_report(refs)
    return {
        "job_id": ray.get_runtime_context().get_job_id(),
        "rounds": rounds,
        "failures": failures,
        "max_round_s": max(latencies),
        "objects": objects,
        "stats": memory_stats(),
    }


def store_tenant_a(total_mb: int = 300, size_mb: int = 20) -> dict[str, Any]:
    """Tenant A: keeps ``total_mb`` of ``ray.put`` objects alive (more than the store)."""
    connect(namespace="tenant-a")
    refs, errors = [], []
    t0 = time.time()
    for _ in range(total_mb // size_mb):
        try:
            refs.append(ray.put(b"\x07" * (size_mb * 1024 * 1024)))
        except Exception as exc:  # noqa: BLE001 - outcome under test
            errors.append(describe_error(exc))
            break
    emit("a_filled", n=len(refs), seconds=round(time.time() - t0, 2))
    # Before reading them back (a read restores a spilled object): where each one is now.
    objects = spill_report(refs)
    ok = sum(1 for r in refs if ray.get(r)[0] == 7)
    # The raylets' count after the owner's report (and after the reads, which may spill more).
    return {
        "job_id": ray.get_runtime_context().get_job_id(),
        "objects": objects,
        "put": len(refs),
        "readable": ok,
        "errors": errors,
        "seconds": round(time.time() - t0, 2),
        "stats": memory_stats(),
    }


# -- TENANT-05 / ADVICE-03 ------------------------------------------------------------------


def job_entry(n_tasks: int, seconds: float) -> None:
    """The Jobs API entrypoint: report its node, run ``n_tasks`` 1-CPU tasks at once."""
    ray.init()
    me = ray.get_runtime_context().get_node_id()
    spans = ray.get([_span.remote(seconds) for _ in range(n_tasks)], timeout=300)
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    print("RAYCHAOS_JOB " + json.dumps({"entry_node_id": me, "peak_concurrency": peak}))


@ray.remote(num_cpus=1)
def _span(seconds: float) -> tuple[float, float]:
    s = time.time()
    time.sleep(seconds)
    return s, time.time()


def _wait_job(client: Any, job: str, timeout: float) -> str:
    from ray.job_submission import JobStatus

    t0 = time.time()
    status = client.get_job_status(job)
    while time.time() - t0 < timeout and status not in {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.STOPPED,
    }:
        time.sleep(1)
        status = client.get_job_status(job)
    return str(status)


def jobs_api(n_tasks: int = 6, seconds: float = 3.0, pending_s: float = 20.0) -> dict[str, Any]:
    """TENANT-05/ADVICE-03: entrypoint placement by ``entrypoint_resources``; it does not cap
    the job's tasks; unsatisfiable entrypoint resources leave the job PENDING; ``max_resources``
    is not a parameter."""
    from ray.job_submission import JobSubmissionClient

    connect()
    client = JobSubmissionClient(f"http://{node_ip('head')}:8265")
    names = {info["ip"]: n for n, info in nodes().items()}
    by_id = {n["NodeID"]: names.get(n["NodeManagerAddress"]) for n in ray.nodes()}
    entry = f"python -m workloads.tenancy job-entry {n_tasks} {seconds}"
    out: dict[str, Any] = {}
    cases = {
        "entrypoint_resources special + entrypoint_num_cpus=1": {
            "entrypoint_num_cpus": 1,
            "entrypoint_resources": {"special": 1},
        },
        "entrypoint_resources only_worker": {"entrypoint_resources": {"only_worker": 1}},
    }
    for label, kw in cases.items():
        t0 = time.time()
        job = client.submit_job(entrypoint=entry, **kw)
        status = _wait_job(client, job, 180)
        logs = client.get_job_logs(job)
        line = next((ln for ln in logs.splitlines() if ln.startswith("RAYCHAOS_JOB ")), None)
        info = json.loads(line.removeprefix("RAYCHAOS_JOB ")) if line else {}
        out[label] = {
            "status": status,
            "seconds": round(time.time() - t0, 2),
            "entry_node": by_id.get(info.get("entry_node_id", ""), info.get("entry_node_id")),
            "peak_concurrency": info.get("peak_concurrency"),
            "logs_tail": logs[-800:] if not line else "",
        }
        emit("job_done", label=label, result=out[label])
    # Unsatisfiable entrypoint resources: PENDING, no error.
    job = client.submit_job(entrypoint=entry, entrypoint_resources={"nobody_has_this": 1})
    time.sleep(pending_s)
    info = client.get_job_info(job)
    out["entrypoint_resources nobody_has_this"] = {
        "status_after_s": pending_s,
        "status": str(info.status),
        "message": (info.message or "")[:400],
        "pending_demands": awaited_demands("nobody_has_this")[0],
    }
    client.stop_job(job)
    # The runbook's quota parameter.
    try:
        client.submit_job(entrypoint="echo hi", max_resources={"CPU": 2})
        out["max_resources"] = {"accepted": True}
    except Exception as exc:  # noqa: BLE001 - outcome under test
        out["max_resources"] = {"accepted": False, "error": describe_error(exc)}
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "job-entry":
        job_entry(int(sys.argv[2]), float(sys.argv[3]))
