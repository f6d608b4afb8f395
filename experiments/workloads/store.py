"""Object store and memory workloads (claims STORE-01..03, OOM-01..02).

``fill_store`` keeps ``ray.put`` objects alive past the store's capacity and reports every
put's outcome, the spill statistics (``ray memory --stats-only``) and the disk usage of the
store, spill and fallback directories. ``oom_task`` makes a task on a chosen node grow until the
memory monitor acts. ``logical_memory`` checks what ``--memory`` / ``--object-store-memory``
on a node limit.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from typing import Any

import ray
from raychaos_agent import emit, knobs, node_id, pin

from workloads.scheduling import (
    actor_states,
    awaited_demands,
    connect,
    counts_by_name,
    describe_error,
    name_of,
    names_by_node_id,
    task_states,
)

MiB = 1024 * 1024


def memory_stats() -> str:
    try:
        out = subprocess.run(
            ["ray", "memory", "--stats-only"], capture_output=True, text=True, timeout=60
        )
        return (out.stdout + out.stderr)[-3000:]
    except Exception as exc:  # noqa: BLE001
        return repr(exc)


def spilled_mib(stats: str) -> float | None:
    """``Spilled N MiB`` from ``ray memory --stats-only`` (None when nothing was spilled)."""
    m = re.search(r"Spilled (\d+) MiB", stats)
    return float(m.group(1)) if m else None


def fallback_mib(stats: str) -> float | None:
    """``Plasma filesystem mmap usage: N MiB`` (fallback allocation) from ``ray memory``."""
    m = re.search(r"Plasma filesystem mmap usage: (\d+) MiB", stats)
    return float(m.group(1)) if m else None


def _process_argv(name: str) -> list[str] | None:
    """The command line of this node's process whose executable ends with ``/name``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and argv[0].endswith(f"/{name}"):
            return argv
    return None


def gcs_system_config() -> dict[str, Any]:
    """The system config the head's ``gcs_server`` was started with (``--config_list``, base64
    JSON, ``services.serialize_config``): what every raylet's RayConfig is initialised from,
    over its own ``RAY_*`` environment."""
    argv = _process_argv("gcs_server")
    if argv is None:
        return {"error": "no gcs_server process on this node"}
    for arg in argv:
        if arg.startswith("--config_list="):
            decoded: dict[str, Any] = json.loads(base64.b64decode(arg.split("=", 1)[1]))
            return decoded
    return {"error": "gcs_server has no --config_list"}


def disk_usage(paths: list[str] | None = None) -> dict[str, Any]:
    paths = paths or ["/dev/shm", "/tmp", "/tmp/ray"]
    out: dict[str, Any] = {}
    for p in paths:
        try:
            u = shutil.disk_usage(p)
            out[p] = {
                "total_mib": u.total // MiB,
                "used_mib": u.used // MiB,
                "used_frac": round(u.used / u.total, 3),
            }
        except OSError as exc:
            out[p] = repr(exc)
    du = subprocess.run(
        [
            "sh",
            "-c",
            "du -sm /tmp/ray/session_latest/ray_spilled_objects* "
            "/dev/shm/spill* /tmp/ray/plasma* 2>/dev/null; ls -la /dev/shm | head",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out["du"] = du.stdout.strip().splitlines()[:20]
    return out


def raylet_env(prefix: str = "RAY_") -> dict[str, str]:
    """The ``RAY_*`` environment of this node's raylet process (proof a knob reached it)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
            if not argv0.endswith(b"/raylet"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                pairs = [
                    e.decode(errors="replace").split("=", 1) for e in f.read().split(b"\0") if e
                ]
            return {k: v for k, v in (p for p in pairs if len(p) == 2) if k.startswith(prefix)}
        except OSError:
            continue
    return {"error": "no raylet process found"}


#: Raylet log lines that say which plasma path a full store took (spill, fallback, disk, OOM).
STORE_LOG_PATTERN = re.compile(
    r"fallback|Out-of-memory|over capacity|is over \d+% full|Spill|OutOfDisk|ObjectStoreFull",
    re.IGNORECASE,
)


def raylet_store_log(limit: int = 40) -> list[str]:
    """The last ``limit`` raylet log lines about the store filling (spill, fallback, disk)."""
    try:
        with open("/tmp/ray/session_latest/logs/raylet.out", errors="replace") as f:
            lines = [line.rstrip() for line in f if STORE_LOG_PATTERN.search(line)]
    except OSError as exc:
        return [repr(exc)]
    return [line[:400] for line in lines[-limit:]]


def fill_store(
    total_mb: int = 300,
    size_mb: int = 10,
    read_back: bool = True,
    put_timeout_s: float = 60.0,
    disk_paths: list[str] | None = None,
) -> dict[str, Any]:
    """Keep ``total_mb`` of ``size_mb`` ``ray.put`` objects alive on this node's store.

    Each put is timed; the first exception stops the loop and is reported with its index.
    ``disk_paths``: extra directories whose usage is reported (a spill or fallback tmpfs).
    """
    connect()
    store = next(
        n["Resources"].get("object_store_memory", 0)
        for n in ray.nodes()
        if n["NodeID"] == node_id()
    )
    emit("filling", total_mb=total_mb, size_mb=size_mb, store_mib=store / MiB, knobs=knobs())
    refs: list[Any] = []
    puts: list[float] = []
    error = None
    t0 = time.time()
    for i in range(total_mb // size_mb):
        t1 = time.time()
        try:
            refs.append(ray.put(bytes([i % 251]) * (size_mb * MiB)))
        except Exception as exc:  # noqa: BLE001 - outcome under test
            error = {"index": i, "after_mib": i * size_mb, **describe_error(exc)}
            break
        puts.append(round(time.time() - t1, 3))
        if time.time() - t0 > put_timeout_s * 5:
            error = {"index": i, "note": "stopped: filling took too long"}
            break
    fill_s = round(time.time() - t0, 2)
    emit("filled", n=len(refs), error=error, seconds=fill_s)
    stats = memory_stats()
    disks = disk_usage(["/dev/shm", "/tmp", "/tmp/ray", *(disk_paths or [])])
    readable = None
    read_error = None
    if read_back and refs:
        try:
            readable = sum(
                1 for i, r in enumerate(refs) if int(ray.get(r, timeout=60)[0]) == i % 251
            )
        except Exception as exc:  # noqa: BLE001
            read_error = describe_error(exc)
    return {
        "store_mib": store / MiB,
        "requested_mib": total_mb,
        "size_mb": size_mb,
        "put_ok": len(refs),
        "put_ok_mib": len(refs) * size_mb,
        "error": error,
        "slowest_put_s": max(puts) if puts else None,
        "fill_s": fill_s,
        "readable": readable,
        "read_error": read_error,
        "spilled_mib": spilled_mib(stats),
        "fallback_mib": fallback_mib(stats),
        "memory_stats": stats,
        "disk": disks,
        "knobs": knobs(),
        "raylet_env": raylet_env(),
        "system_config": gcs_system_config(),
        "raylet_store_log": raylet_store_log(),
    }


# -- OOM-01 ---------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
def hog(token: str, grow_mb: int, step_mb: int, heavy_attempts: int) -> dict[str, Any]:
    """Count attempts in a file on this node; the first ``heavy_attempts`` grow until killed."""
    path = f"/tmp/raychaos-oom-{token}"
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")
    with open(path) as f:
        attempt = len(f.read().split())
    if attempt <= heavy_attempts:
        chunks = []
        for _ in range(grow_mb // step_mb):
            chunks.append(b"x" * (step_mb * MiB))
            time.sleep(0.05)
        time.sleep(5)  # survived: the monitor did not act
        return {"attempt": attempt, "survived_heavy": True}
    return {"attempt": attempt, "survived_heavy": False}


def _attempts(token: str) -> int:
    @ray.remote(num_cpus=0)
    def count(tok: str) -> int:
        try:
            with open(f"/tmp/raychaos-oom-{tok}") as f:
                return len(f.read().split())
        except OSError:
            return 0

    return ray.get(count.options(scheduling_strategy=_pin_strategy).remote(token), timeout=60)


_pin_strategy: Any = None


def oom_task(
    node_name: str = "worker",
    cases: list[dict[str, int]] | None = None,
    grow_mb: int = 1500,
    step_mb: int = 20,
    timeout_s: float = 150,
) -> dict[str, Any]:
    """OOM-01: tasks pinned to ``node_name`` grow until the memory monitor kills them.

    Each case: ``max_retries`` and ``heavy_attempts`` (how many attempts grow). Reports the
    outcome, attempts made (counted on the node), State API task attempts and error types,
    worker exit types, and whether the node stayed alive.
    """
    global _pin_strategy
    connect()
    _pin_strategy = pin(node_name)
    target_id = _pin_strategy.node_id
    cases = cases or [
        {"max_retries": 0, "heavy_attempts": 1},
        {"max_retries": 1, "heavy_attempts": 3},
        {"max_retries": -1, "heavy_attempts": 2},
    ]
    out: dict[str, Any] = {"knobs": knobs(), "node": node_name, "cases": []}
    for case in cases:
        token = uuid.uuid4().hex[:10]
        name = f"hog_{token}"
        t0 = time.time()
        ref = hog.options(
            scheduling_strategy=_pin_strategy, max_retries=case["max_retries"], name=name
        ).remote(token, grow_mb, step_mb, case["heavy_attempts"])
        emit("hog_submitted", case=case, token=token)
        res: dict[str, Any] = {"case": case}
        try:
            res["value"] = ray.get(ref, timeout=timeout_s)
            res["ok"] = True
        except Exception as exc:  # noqa: BLE001 - outcome under test
            res["ok"] = False
            res["error"] = describe_error(exc)
        res["seconds"] = round(time.time() - t0, 2)
        res["attempts_on_node"] = _attempts(token)
        time.sleep(2)
        res["state_api"] = [
            {"attempt": s["attempt"], "state": s["state"], "error_type": s["error_type"]}
            for s in task_states(name, wait_s=5)
        ]
        out["cases"].append(res)
        emit("hog_done", result={k: v for k, v in res.items() if k != "state_api"})
    out["worker_exit_types"] = _worker_exits(target_id)
    out["node_alive"] = any(n["NodeID"] == target_id and n["Alive"] for n in ray.nodes())
    return out


def _worker_exits(node: str) -> dict[str, int]:
    from ray.util.state import list_workers

    try:
        rows = list_workers(
            filters=[("node_id", "=", node)], detail=True, limit=1000, raise_on_missing_output=False
        )
    except Exception as exc:  # noqa: BLE001
        return {"error": str(exc)[:300]}  # type: ignore[dict-item]
    counts: dict[str, int] = {}
    for r in rows:
        key = str(getattr(r, "exit_type", None))
        counts[key] = counts.get(key, 0) + 1
    return counts


# -- OOM-02 ---------------------------------------------------------------------------------


@ray.remote
class Plain:
    def where(self) -> str:
        return ray.get_runtime_context().get_node_id()


def logical_memory(
    head_resource: str = "headslot", declared_mb: int = 150, n: int = 3, wait_s: float = 8.0
) -> dict[str, Any]:
    """OOM-02: on a head started with ``--memory`` M and ``--object-store-memory`` S:
    undeclared actors land there regardless; actors declaring ``memory=`` fit only M/declared;
    default-strategy actors from a driver on the head still land on the head."""
    connect()
    names = names_by_node_id()
    head = next(n for n in ray.nodes() if n["Alive"] and names[n["NodeID"]] == "head")
    res = head["Resources"]
    out: dict[str, Any] = {
        "head_memory_mib": res.get("memory", 0) / MiB,
        "head_object_store_mib": res.get("object_store_memory", 0) / MiB,
        "per_node_memory_mib": {
            names[x["NodeID"]]: x["Resources"].get("memory", 0) / MiB
            for x in ray.nodes()
            if x["Alive"]
        },
        "per_node_object_store_mib": {
            names[x["NodeID"]]: x["Resources"].get("object_store_memory", 0) / MiB
            for x in ray.nodes()
            if x["Alive"]
        },
    }
    # Undeclared actors, pinned to the head by a custom resource, more than M would allow
    # if memory were counted.
    undeclared = [
        Plain.options(num_cpus=0, resources={head_resource: 1}).remote() for _ in range(n)
    ]
    ready, pend = ray.wait([a.where.remote() for a in undeclared], num_returns=n, timeout=60)
    out["undeclared_on_head"] = {
        "alive": len(ready),
        "pending": len(pend),
        "nodes": [name_of(ray.get(r), names) for r in ready],
    }
    for a in undeclared:
        ray.kill(a)
    # Declared memory, pinned to the head: only floor(M / declared) fit; the rest wait.
    declared = [
        Plain.options(num_cpus=0, memory=declared_mb * MiB, resources={head_resource: 1}).remote()
        for _ in range(n)
    ]
    fit = int(out["head_memory_mib"] // declared_mb)
    refs = [a.where.remote() for a in declared]
    # Those that fit start within the worker start-up time (slow on a loaded host), then the
    # rest must still be pending after a further ``wait_s``.
    ready, pend = ray.wait(refs, num_returns=min(fit, n) or 1, timeout=60)
    if pend:
        more, pend = ray.wait(pend, num_returns=len(pend), timeout=wait_s)
        ready += more
    out["declared_on_head"] = {
        "declared_mib": declared_mb,
        "alive": len(ready),
        "pending": len(pend),
        "expected_fit": fit,
        "states": sorted(s["state"] for s in actor_states("Plain") if s["state"] != "DEAD"),
        "pending_demands": awaited_demands(f"'memory': {float(declared_mb * MiB)}")[0],
    }
    for a in declared:
        ray.kill(a)
    # ray.kill is asynchronous: wait (bounded) until the head's logical memory is free again,
    # or the hybrid policy sees the head as busy (memory is a scored resource) and spreads.
    t0 = time.time()
    while time.time() - t0 < 30:
        if ray.available_resources().get("memory", 0) >= ray.cluster_resources().get("memory", 0):
            break
        time.sleep(0.5)
    out["memory_freed_after_s"] = round(time.time() - t0, 2)
    # Default strategy, no memory declared, driver on the head: the runbook's symptom.
    default = [Plain.options(num_cpus=1).remote() for _ in range(2)]
    where = ray.get([a.where.remote() for a in default], timeout=60)
    out["default_two_actors"] = counts_by_name(where)
    for a in default:
        ray.kill(a)
    return out


def _cgroup_memory() -> tuple[int, int]:
    """(used, limit) bytes of this container's memory cgroup, as Ray's memory monitor counts
    them: usage minus inactive file cache (cgroup v1 or v2)."""
    v2 = "/sys/fs/cgroup/memory.current"
    if os.path.exists(v2):
        usage_path, limit_path, stat_path, key = (
            v2,
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory.stat",
            "inactive_file",
        )
    else:
        base = "/sys/fs/cgroup/memory"
        usage_path, limit_path, stat_path, key = (
            f"{base}/memory.usage_in_bytes",
            f"{base}/memory.limit_in_bytes",
            f"{base}/memory.stat",
            "total_inactive_file",
        )
    with open(usage_path) as f:
        usage = int(f.read())
    with open(limit_path) as f:
        limit = int(f.read().strip().replace("max", str(1 << 62)))
    with open(stat_path) as f:
        stat = dict(line.split() for line in f if line.strip())
    return usage - int(stat.get(key, 0)), limit


@ray.remote(num_cpus=1, max_retries=0)
def hold_at(fraction: float, hold_s: float, step_mb: int = 10) -> dict[str, Any]:
    """Grow this node's memory use to ``fraction`` of its cgroup limit, then hold it."""
    chunks = []
    used, limit = _cgroup_memory()
    while used / limit < fraction:
        chunks.append(b"x" * (step_mb * MiB))
        used, limit = _cgroup_memory()
    reached = round(used / limit, 3)
    deadline = time.monotonic() + hold_s
    lowest = reached
    while time.monotonic() < deadline:  # held: the monitor sees it every refresh
        used, limit = _cgroup_memory()
        lowest = min(lowest, round(used / limit, 3))
        time.sleep(0.05)
    return {"reached": reached, "lowest_while_held": lowest, "held_mib": len(chunks) * step_mb}


def memory_threshold_effect(nodes: list[str], fraction: float, hold_s: float) -> dict[str, Any]:
    """ADVICE-01: the same task, pinned to each node in turn, holds ``fraction`` of the node's
    memory for ``hold_s``; reports per node whether it finished or how it failed."""
    connect()
    out: dict[str, Any] = {}
    for name in nodes:
        ref = hold_at.options(scheduling_strategy=pin(name)).remote(fraction, hold_s)
        try:
            out[name] = {"ok": True, "value": ray.get(ref, timeout=120)}
        except Exception as exc:  # noqa: BLE001 - outcome under test
            out[name] = {"ok": False, "error": describe_error(exc)}
        emit("held", node=name, outcome=out[name])
    return out
