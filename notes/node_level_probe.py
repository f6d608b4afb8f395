# ruff: noqa  -- a throw-away probe script kept as evidence, not part of the package
"""Host-side probe used to produce notes/node-level-findings.md (not part of the suite).

    python notes/node_level_probe.py VERSION SCENARIO [SCENARIO ...]

Each scenario boots what it needs (``with Cluster``), runs a workload from
experiments/workloads/{tasks,objects,actors,nodes}.py, strikes, and prints one JSON line
``PROBE {...}`` with the outcome and timings. Scenarios that strike nothing share one cluster.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from chaos.cluster import Cluster
from chaos.spec import ClusterSpec, NodeSpec

FAST_HC = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "0",
}
WORKLOADS = [Path(__file__).resolve().parents[1] / "experiments" / "workloads"]


def spec(version: str, workers: int = 2, env: dict[str, str] | None = None,
         head_cpus: float = 0) -> ClusterSpec:
    return ClusterSpec(
        ray_version=version, env={**FAST_HC, **(env or {})},
        head=NodeSpec(name="head", num_cpus=head_cpus),
        workers=(NodeSpec(name="worker", count=workers, num_cpus=1),),
    )


def kill_node(c: Cluster, name: str) -> float:
    t = time.time()
    c.node(name).container.kill()
    c.history.record("nemesis", "kill_node", node=name)
    return t


def kill_raylet(c: Cluster, name: str) -> float:
    t = time.time()
    r = c.exec(name, ["pkill", "-9", "-x", "raylet"])
    c.history.record("nemesis", "kill_raylet", node=name, rc=r.exit_code)
    return t


def outcome_dict(run: Any, timeout: float | None = None) -> dict[str, Any]:
    o = run.outcome(timeout)
    if o.error is not None:
        return {"raised": {"type": o.error.type, "bases": list(o.error.bases),
                           "message": o.error.message[:1500], "attrs": o.error.attrs,
                           "tb": o.error.traceback[-1500:]}, "t": o.t}
    return {"value": o.value, "t": o.t}


SCENARIOS: dict[str, Callable[[str], Any]] = {}


def scenario(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    SCENARIOS[fn.__name__] = fn
    return fn


def report(name: str, version: str, data: Any) -> None:
    line = json.dumps({"scenario": name, "version": version, **data}, default=str)
    print("PROBE " + line, flush=True)
    with open(Path(__file__).with_name("probe-results.jsonl"), "a") as f:
        f.write(line + "\n")


@scenario
def tasks_nondestructive(v: str) -> None:
    cases: list[tuple[str, str, dict[str, Any], dict[str, str] | None]] = [
        ("TASK-01 max_retries=2 always crash", "worker_crash_retries", {"max_retries": 2}, None),
        ("TASK-01 default always crash", "worker_crash_retries", {}, None),
        ("TASK-01 max_retries=3 crash twice", "worker_crash_retries",
         {"max_retries": 3, "crash_attempts": 2}, None),
        ("TASK-02 env=1 no option", "worker_crash_retries", {}, {"RAY_TASK_MAX_RETRIES": "1"}),
        ("TASK-02 env=1 max_retries=2", "worker_crash_retries", {"max_retries": 2},
         {"RAY_TASK_MAX_RETRIES": "1"}),
        ("TASK-02 env=0 no option", "worker_crash_retries", {}, {"RAY_TASK_MAX_RETRIES": "0"}),
        ("TASK-03 default", "app_exception_retries", {}, None),
        ("TASK-03 retry_exceptions=True max_retries=2", "app_exception_retries",
         {"retry_exceptions": True, "max_retries": 2}, None),
        ("TASK-03 retry_exceptions=True default budget", "app_exception_retries",
         {"retry_exceptions": True}, None),
        ("TASK-03 list[ValueError] raises AppError", "app_exception_retries",
         {"retry_exceptions": ["ValueError"], "max_retries": 2}, None),
        ("TASK-03 list[ValueError] raises ValueError", "app_exception_retries",
         {"retry_exceptions": ["ValueError"], "max_retries": 2, "raise_type": "ValueError"}, None),
        ("TASK-03 retry True, fails once then ok", "app_exception_retries",
         {"retry_exceptions": True, "max_retries": 2, "fail_attempts": 1}, None),
    ]
    with Cluster(spec(v), workload_paths=WORKLOADS) as c:
        for label, fn, kwargs, env in cases:
            run = c.run(f"workloads.tasks:{fn}", timeout=240, env=env, **kwargs)
            report(label, v, outcome_dict(run))


@scenario
def tasks_node_death(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        # TASK-04: max_retries=0, node killed
        run = c.run("workloads.tasks:task_on_dying_node", timeout=300, on="worker-1",
                    max_retries=0)
        run.wait_for("task_running", timeout=120)
        t_kill = kill_node(c, "worker-1")
        out = outcome_dict(run)
        report("TASK-04 max_retries=0 node kill", v, {"t_kill": t_kill, **out})
        # TASK-05: retries left, soft pin, retry_exceptions=False
        run = c.run("workloads.tasks:task_on_dying_node", timeout=300, on="worker-2",
                    max_retries=1, soft=True, retry_exceptions=False)
        run.wait_for("task_running", timeout=120)
        t_kill = kill_node(c, "worker-2")
        out = outcome_dict(run)
        report("TASK-05 max_retries=1 soft node kill", v, {"t_kill": t_kill, **out})



def strike_when(c: Cluster, run: Any, event: str, how: str = "node", count: int = 1,
                timeout: float = 180) -> tuple[float, str]:
    """Wait for the workload's ``event`` (the count-th), kill the node it names."""
    try:
        ev = run.wait_for(event, count=count, timeout=timeout)[-1]
    except Exception as exc:
        errs = [e.get("error") for e in run.events("error")]
        raise RuntimeError(f"{exc}; workload error: {json.dumps(errs, default=str)[:2500]}") from exc
    name = ev.get("node_name") or c.node_by_id(ev.get("node_id")).name
    if how == "node":
        return kill_node(c, name), name
    if how == "raylet":
        return kill_raylet(c, name), name
    if how == "pid":
        t = time.time()
        c.exec(name, ["kill", "-9", str(ev.get("pid"))])
        return t, name
    raise ValueError(how)


@scenario
def objects_a(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.objects:lineage_reconstruction", timeout=300, on="worker-1",
                    read_via="both", reader="worker-2")
        t, name = strike_when(c, run, "object_ready")
        report("OBJ-01 default retries, node kill", v, {"t_kill": t, "killed": name, **outcome_dict(run)})
        run = c.run("workloads.objects:lineage_reconstruction", timeout=300, on="worker-2",
                    max_retries=0, read_via="both", reader="worker-3")
        t, name = strike_when(c, run, "object_ready")
        report("OBJ-02 max_retries=0, node kill", v, {"t_kill": t, "killed": name, **outcome_dict(run)})


@scenario
def objects_b(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.objects:lineage_reconstruction", timeout=400, on="worker-1",
                    max_retries=1, losses=2, read_via="driver")
        t1, n1 = strike_when(c, run, "object_ready", count=1)
        t2, n2 = strike_when(c, run, "object_ready", count=2)
        report("OBJ-03 max_retries=1, two losses", v,
               {"t_kills": [t1, t2], "killed": [n1, n2], **outcome_dict(run)})


@scenario
def objects_c(v: str) -> None:
    with Cluster(spec(v, workers=2), workload_paths=WORKLOADS) as c:
        for via in ("put", "task"):
            for read_on in ("worker-2", "worker-1"):
                run = c.run("workloads.objects:owner_died", timeout=300, owner_on="worker-2",
                            via=via, producer_on="worker-2", kill="ray.kill", read_on=read_on)
                report(f"OBJ-05 owner ray.kill via={via} copy on worker-2 read_on={read_on}", v,
                       outcome_dict(run))
        run = c.run("workloads.objects:owner_died", timeout=300, owner_on="worker-2",
                    via="put", kill="host", read_on="worker-2")
        t, name = strike_when(c, run, "owner_ready", how="pid")
        report("OBJ-05 owner SIGKILL via=put", v, {"t_kill": t, **outcome_dict(run)})
        run = c.run("workloads.objects:put_secondary_copy", timeout=300, copy_on="worker-1",
                    read_on="worker-2")
        t, name = strike_when(c, run, "secondary_copy")
        report("OBJ-04 secondary copy node dies", v, {"t_kill": t, **outcome_dict(run)})


@scenario
def objects_d(v: str) -> None:
    with Cluster(spec(v, workers=3, env={"RAY_max_lineage_bytes": "100000"}),
                 workload_paths=WORKLOADS) as c:
        run = c.run("workloads.objects:lineage_evicted", timeout=400, on="worker-1")
        t, name = strike_when(c, run, "object_ready")
        report("OBJ-06 max_lineage_bytes=100000, 12x20KiB specs", v, {"t_kill": t, **outcome_dict(run)})
        run = c.run("workloads.objects:lineage_evicted", timeout=400, on="worker-2", count=3)
        t, name = strike_when(c, run, "object_ready")
        report("OBJ-06 max_lineage_bytes=100000, 3x20KiB specs (under the cap)", v,
               {"t_kill": t, **outcome_dict(run)})


@scenario
def objects_d_control(v: str) -> None:
    with Cluster(spec(v, workers=2), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.objects:lineage_evicted", timeout=400, on="worker-1")
        t, name = strike_when(c, run, "object_ready")
        report("OBJ-06 control: default max_lineage_bytes, 12x20KiB specs", v,
               {"t_kill": t, **outcome_dict(run)})


@scenario
def actors_a(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        for mtr in (0, -1):
            run = c.run("workloads.actors:calls_during_restart", timeout=300, on="worker-1",
                        max_task_retries=mtr)
            report(f"ACTOR-03 max_task_retries={mtr}", v, outcome_dict(run))
        run = c.run("workloads.actors:owner_dies", timeout=300, parent_on="worker-1",
                    child_on="worker-2", kill="self")
        report("ACTOR-04 parent SIGKILL", v, outcome_dict(run))
        run = c.run("workloads.actors:actor_dies", timeout=300, on="worker-1", kill="self")
        report("ACTOR-01 process SIGKILL", v, outcome_dict(run))
        run = c.run("workloads.actors:actor_restarts", timeout=300, on="worker-1",
                    kill="self", max_restarts=1, deaths=2)
        report("ACTOR-02 process SIGKILL x2, max_restarts=1", v, outcome_dict(run))
        run = c.run("workloads.actors:actor_dies", timeout=300, on="worker-1", kill="host")
        t, name = strike_when(c, run, "actor_alive")
        report("ACTOR-01 node kill", v, {"t_kill": t, **outcome_dict(run)})
        run = c.run("workloads.actors:actor_restarts", timeout=400, on="worker-2",
                    kill="host", max_restarts=1, deaths=2)
        t1, n1 = strike_when(c, run, "actor_alive", count=1)
        t2, n2 = strike_when(c, run, "actor_alive", count=2)
        report("ACTOR-02 node kill x2, max_restarts=1", v,
               {"t_kills": [t1, t2], "killed": [n1, n2], **outcome_dict(run)})


@scenario
def actors_b(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.actors:actor_output_lost", timeout=300, on="worker-1",
                    max_restarts=1, max_task_retries=0)
        t, name = strike_when(c, run, "object_ready")
        report("ACTOR-05 max_task_retries=0", v, {"t_kill": t, **outcome_dict(run)})
        run = c.run("workloads.actors:actor_output_lost", timeout=300, on="worker-2",
                    max_restarts=1, max_task_retries=-1)
        t, name = strike_when(c, run, "object_ready")
        report("ACTOR-05 max_task_retries=-1", v, {"t_kill": t, **outcome_dict(run)})


@scenario
def nodes_a(v: str) -> None:
    with Cluster(spec(v, workers=3), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.nodes:node_death", timeout=300, on="worker-1")
        t, _ = strike_when(c, run, "node_busy")
        report("NODE-01 container kill", v, {"t_kill": t, **outcome_dict(run),
                                             "driver_output": run.stream.tail(30)})
        run = c.run("workloads.nodes:node_death", timeout=300, on="worker-2")
        t, _ = strike_when(c, run, "node_busy", how="raylet")
        out = outcome_dict(run)
        ps = c.exec("worker-2", ["sh", "-c", "ps -eo pid,comm,args | grep -v ' ps ' | cut -c1-120"]).output
        report("NODE-02 raylet kill", v, {"t_kill": t, **out, "ps_after": ps,
                                          "driver_output": run.stream.tail(30)})
        run = c.run("workloads.nodes:node_death", timeout=300, on="worker-3")
        strike_when.__doc__  # noqa: B018
        try:
            run.wait_for("node_busy", timeout=180)
        except Exception as exc:
            errs = [e.get("error") for e in run.events("error")]
            raise RuntimeError(f"{exc}; workload error: {json.dumps(errs, default=str)[:2500]}") from exc
        t = time.time()
        r = c.exec("worker-3", ["ray", "stop"], timeout=90)
        report("NODE-04 ray stop (SIGTERM)", v, {"t_kill": t, "ray_stop": r.output[-800:],
                                                 **outcome_dict(run),
                                                 "driver_output": run.stream.tail(30)})


@scenario
def nodes_b(v: str) -> None:
    with Cluster(spec(v, workers=2), workload_paths=WORKLOADS) as c:
        run = c.run("workloads.nodes:node_rejoins", timeout=300, on="worker-1")
        run.wait_for("node_known", timeout=120)
        t = kill_node(c, "worker-1")
        run.wait_for("old_node_dead", timeout=120)
        t2 = time.time()
        c.node("worker-1").container.start()
        report("NODE-03 container kill + docker start", v,
               {"t_kill": t, "t_restart": t2, **outcome_dict(run)})
        run = c.run("workloads.nodes:node_rejoins", timeout=300, on="worker-2")
        run.wait_for("node_known", timeout=120)
        t = kill_raylet(c, "worker-2")
        run.wait_for("old_node_dead", timeout=120)
        n = c.node("worker-2")
        stop = c.exec("worker-2", ["ray", "stop", "--force"], timeout=60)
        t2 = time.time()
        start = c.exec("worker-2", c.ray_start_argv("worker-2", "worker", n.spec, n.ip), timeout=120)
        report("NODE-03 raylet kill + ray start", v,
               {"t_kill": t, "t_restart": t2, "ray_start_rc": start.exit_code,
                "ray_start_tail": start.output[-600:], **outcome_dict(run)})


if __name__ == "__main__":
    version = sys.argv[1]
    for name in sys.argv[2:]:
        started = time.time()
        try:
            SCENARIOS[name](version)
        except Exception as exc:  # noqa: BLE001
            ctx = exc.__context__
            report(name, version, {"probe_error": f"{type(exc).__name__}: {exc}"[:3000],
                                   "during": f"{type(ctx).__name__}: {ctx}"[:3000] if ctx else None})
        print(f"# {name} on {version} took {time.time() - started:.0f} s", flush=True)
