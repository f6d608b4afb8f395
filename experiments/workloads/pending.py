"""Pending-work workloads (claims PEND-01..06): requests that wait, and errors that only look
like waiting. Every pending check is bounded: ``ray.wait`` with a timeout, then the State API
state and ``ray status`` demand lines as evidence that the work is still pending.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import ray
from raychaos_agent import emit, node_ip, nodes, until

from workloads.scheduling import (
    actor_states,
    awaited_demands,
    connect,
    counts_by_name,
    describe_error,
    name_of,
    names_by_node_id,
    pending_demands,
    ray_status,
    task_states,
)


@ray.remote
def wants(seconds: float = 0.0) -> str:
    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id()


@ray.remote
class Wanter:
    def where(self) -> str:
        return ray.get_runtime_context().get_node_id()


def _opts(request: dict[str, Any]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in ("num_cpus", "num_gpus", "memory", "accelerator_type"):
        if key in request:
            opts[key] = request[key]
    if "resources" in request:
        opts["resources"] = request["resources"]
    opts.setdefault("num_cpus", 0 if ("num_gpus" in request or "resources" in request) else 1)
    return opts


def infeasible(
    request: dict[str, Any],
    kind: str = "task",
    wait_s: float = 10.0,
    join_wait_s: float = 0.0,
    demand: str = "",
) -> dict[str, Any]:
    """PEND-01: submit one task/actor whose ``request`` no node satisfies.

    ``demand``: the Pending Demands text to wait for (bounded) in ``ray status``.

    After ``wait_s`` it must still be pending (ray.wait), with its State API state and the
    ``ray status`` demand lines recorded. Emits ``pending_confirmed``; if ``join_wait_s`` > 0 it
    then waits that long for a fitting node to join and the work to run, and reports where.
    """
    connect()
    opts = _opts(request)
    emit("submitting", kind=kind, options=opts)
    started = time.time()
    if kind == "actor":
        actor = Wanter.options(**opts).remote()
        ref = actor.where.remote()
    else:
        ref = wants.options(**opts).remote()
    ready, _ = ray.wait([ref], timeout=wait_s)
    states = actor_states("Wanter") if kind == "actor" else task_states("wants")
    demands, status = awaited_demands(demand) if demand else ([], ray_status())
    out: dict[str, Any] = {
        "options": opts,
        "kind": kind,
        "ready_after_wait": bool(ready),
        "wait_s": wait_s,
        "states": [s["state"] for s in states],
        "pending_demands": demands or pending_demands(status),
        "ray_status": status,
    }
    emit("pending_confirmed", ready=bool(ready), states=out["states"])
    if join_wait_s > 0 and not ready:
        t0 = time.time()
        try:
            where = ray.get(ref, timeout=join_wait_s)
            out["ran_on"] = name_of(where)
            out["ran_after_join_wait_s"] = round(time.time() - t0, 2)
        except Exception as exc:  # noqa: BLE001 - outcome under test
            out["join_error"] = describe_error(exc)
    out["total_s"] = round(time.time() - started, 2)
    if kind == "actor":
        ray.kill(actor)
    else:
        ray.cancel(ref, force=True)
    return out


def _group_resources(resources: dict[str, float]) -> list[str]:
    """Placement-group resources (``CPU_group_<id>`` …) left in a resource view."""
    return sorted(k for k in resources if "_group_" in k)


def strict_pg(
    strategy: str = "STRICT_SPREAD",
    bundles: list[dict[str, float]] | None = None,
    wait_s: float = 10.0,
) -> dict[str, Any]:
    """PEND-02: a placement group larger than the cluster stays PENDING; removing it frees all.

    ``bundles`` default: one more ``{"CPU": 1}`` bundle than there are alive nodes.
    """
    from ray.util.placement_group import (
        placement_group,
        placement_group_table,
        remove_placement_group,
    )
    from ray.util.state import list_placement_groups

    connect()
    alive = [n for n in ray.nodes() if n["Alive"]]
    if bundles is None:
        bundles = [{"CPU": 1}] * (len(alive) + 1)
    before = dict(ray.available_resources())
    pg = placement_group(bundles, strategy=strategy)
    ready, _ = ray.wait([pg.ready()], timeout=wait_s)
    table = placement_group_table(pg)
    rows = list_placement_groups(
        filters=[("placement_group_id", "=", pg.id.hex())], raise_on_missing_output=False
    )
    demands, status = awaited_demands(f"({strategy}): 1+ pending placement groups")
    during = dict(ray.available_resources())
    emit("pg_pending", ready=bool(ready), state=table.get("state"))
    remove_placement_group(pg)
    # Removal is asynchronous: wait (bounded) until the GCS says REMOVED and the resource
    # view carries no ``_group_`` resources.
    after_table, after = until(
        lambda: (placement_group_table(pg), dict(ray.available_resources())),
        lambda seen: seen[0].get("state") == "REMOVED" and not _group_resources(seen[1]),
        30,
    )
    pg_resources_left = _group_resources(after)
    return {
        "strategy": strategy,
        "bundles": bundles,
        "alive_nodes": len(alive),
        "ready_after_wait": bool(ready),
        "state": table.get("state"),
        "state_api": [r.state for r in rows],
        "pending_demands": demands,
        "cpu_before": before.get("CPU"),
        "cpu_during": during.get("CPU"),
        "cpu_after": after.get("CPU"),
        "state_after_remove": after_table.get("state"),
        "pg_resources_left": pg_resources_left,
        "ray_status": status,
    }


#: How long ``ray status`` may lag ``ray.nodes()`` after a join (resource reports every ~1 s).
STATUS_LAG_S = 30.0


def membership(absent: list[str] | None = None) -> dict[str, Any]:
    """PEND-03: which harness nodes are in ``ray.nodes()`` / ``ray status``, and total CPU."""
    connect()
    ips = {n["NodeManagerAddress"]: n for n in ray.nodes()}
    alive = [n["NodeID"] for n in ips.values() if n["Alive"]]
    # `ray status` reads the autoscaler's view, which lags a join by a report or two.
    status = until(ray_status, lambda s: all(i in s for i in alive), timeout=STATUS_LAG_S)
    report: dict[str, Any] = {}
    for name, info in nodes().items():
        if info.get("role") == "redis":
            continue
        n = ips.get(info["ip"])
        report[name] = {
            "in_ray_nodes": n is not None,
            "alive": bool(n and n["Alive"]),
            "node_id": n["NodeID"] if n else None,
            "in_ray_status": bool(n and n["NodeID"] in status),
        }
    return {
        "nodes": report,
        "absent": absent or [],
        "cluster_cpu": ray.cluster_resources().get("CPU"),
        "cluster_resources": {
            k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")
        },
        "ray_status": status,
    }


def gpu_and_type(n: int = 3, wait_s: float = 30.0) -> dict[str, Any]:
    """PEND-04: tasks asking for a GPU plus a GPU-type resource run only where both exist."""
    connect()
    cases = {
        "gpu+A100 custom": {"num_gpus": 1, "resources": {"A100": 1}},
        "gpu+accelerator_type=A100": {"num_gpus": 1, "accelerator_type": "A100"},
        "gpu only": {"num_gpus": 1},
        "A100 custom only": {"resources": {"A100": 1}},
        "gpu+H100 custom (nobody)": {"num_gpus": 1, "resources": {"H100": 1}},
    }
    out: dict[str, Any] = {
        "cluster": {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
    }
    for label, req in cases.items():
        opts = _opts(req)
        refs = [wants.options(**opts).remote(0.3) for _ in range(n)]
        # Work that fits must finish (worker start-up is slow on a loaded host); only the case
        # nobody can run is watched for just ``wait_s``.
        bound = wait_s if "(nobody)" in label else max(wait_s, 60.0)
        ready, not_ready = ray.wait(refs, num_returns=n, timeout=bound)
        out[label] = {
            "options": opts,
            "counts": counts_by_name([ray.get(r) for r in ready], include_all=False),
            "pending": len(not_ready),
        }
        for r in not_ready:
            ray.cancel(r, force=True)
        emit("case", label=label, result=out[label])
    return out


def start_attempt(
    address: str, drop_to: str | None = None, timeout_s: float = 180, extra: list[str] | None = None
) -> dict[str, Any]:
    """PEND-05: run ``ray start --address=…`` in this node and time how it fails.

    ``drop_to``: a node name whose IP gets an iptables DROP rule first (a firewall that drops
    packets, no RST). Does not connect to Ray itself. The rule is removed and ``ray stop`` run
    afterwards.
    """
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    rule = None
    if drop_to:
        rule = ["OUTPUT", "-d", node_ip(drop_to), "-j", "DROP"]
        subprocess.run(["iptables", "-A", *rule], check=True)
    argv = ["ray", "start", f"--address={address}", "--num-cpus=1", *(extra or [])]
    emit("ray_start", argv=argv, drop_to=drop_to)
    t0 = time.time()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
        rc: int | None = proc.returncode
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        output = f"(still running after {timeout_s} s) " + str(exc.stdout or "")[-1500:]
    seconds = round(time.time() - t0, 2)
    if rule:
        subprocess.run(["iptables", "-D", *rule], check=False)
    subprocess.run(["ray", "stop", "--force"], capture_output=True, env=env, timeout=60)
    tail = output.strip().splitlines()[-12:]
    return {"argv": argv, "rc": rc, "seconds": seconds, "output_tail": tail}


@ray.remote
class BrokenInit:
    def __init__(self) -> None:
        raise ValueError("init failed on purpose")

    def ping(self) -> str:
        return "pong"


@ray.remote
class EnvActor:
    def ping(self) -> str:
        return "pong"


def app_errors(
    runtime_envs: list[dict[str, Any]] | None = None,
    timeout_s: float = 120,
    kinds: list[str] | None = None,
) -> dict[str, Any]:
    """PEND-06: failures that are not pending: a raising ``__init__`` and runtime envs that
    cannot be set up (for a task and for an actor). Each outcome with its time to fail."""
    connect()
    out: dict[str, Any] = {}
    t0 = time.time()
    actor = BrokenInit.remote()
    try:
        ray.get(actor.ping.remote(), timeout=timeout_s)
        out["broken_init"] = {"ok": True}
    except Exception as exc:  # noqa: BLE001 - outcome under test
        out["broken_init"] = {"ok": False, "error": describe_error(exc)}
    out["broken_init"]["seconds"] = round(time.time() - t0, 2)
    out["broken_init"]["state_api"] = until(  # the State API lags the GCS
        lambda: actor_states("BrokenInit"), lambda rows: [r["state"] for r in rows] == ["DEAD"], 30
    )
    try:  # a second call: still the same error, not pending
        ray.get(actor.ping.remote(), timeout=30)
    except Exception as exc:  # noqa: BLE001
        out["broken_init"]["second_call"] = describe_error(exc)["type"]
    if runtime_envs is None:
        runtime_envs = [
            {"working_dir": "https://raychaos.invalid/nothing.zip"},
            {"pip": ["raychaos-no-such-package==0.0.1"]},
            {"conda": "raychaos_no_such_env"},
        ]
    for env in runtime_envs:
        key = ",".join(f"{k}" for k in env)
        for kind in kinds or ["task", "actor"]:
            t0 = time.time()
            emit("runtime_env_try", env=env, kind=kind)
            try:
                env_actor = None
                if kind == "task":
                    ref = wants.options(runtime_env=env, num_cpus=0).remote()
                else:
                    env_actor = EnvActor.options(runtime_env=env, num_cpus=0).remote()
                    ref = env_actor.ping.remote()
                ready, _ = ray.wait([ref], timeout=timeout_s)
                if not ready:
                    states = task_states("wants") if kind == "task" else actor_states("EnvActor")
                    res: dict[str, Any] = {
                        "ok": None,
                        "pending_after_s": timeout_s,
                        "states": states,
                    }
                    if env_actor is not None:
                        ray.kill(env_actor)
                    else:
                        ray.cancel(ref, force=True)
                else:
                    ray.get(ref)
                    res = {"ok": True}
            except Exception as exc:  # noqa: BLE001 - outcome under test
                res = {"ok": False, "error": describe_error(exc)}
            res["seconds"] = round(time.time() - t0, 2)
            out[f"runtime_env[{key}] {kind}"] = res
            emit("runtime_env_done", key=key, kind=kind, result=res)
    return out


def names() -> dict[str, str]:
    connect()
    return names_by_node_id()
