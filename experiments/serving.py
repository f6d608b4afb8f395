"""Ray Serve's experiments' shared hands: the cluster's Serve actors, the HTTP client, the
controller's log, deployments (the verdicts over what they record: ``verdicts.serve``).

Every experiment deploys its applications from a workload on the node hosting the drivers
(the driver node where the head is struck, else the head: ``workloads.serve``), with the
proxies on ``0.0.0.0:8000`` on each node that hosts a replica and on the head. Where traffic
matters, a second workload there is the client (``workloads.serve_load:load``): plain HTTP to
chosen proxies, two threads per proxy, one request at a time with a timeout; it reports every
success's completion time and who answered, every failure's send and end times and error, and
one ``load_second`` event a second. Replica, proxy and controller actors are found through
the State API (classes ``ServeReplica:<app>:<deployment>``, ``ProxyActor``,
``ServeController``) and killed by PID inside their node (``kill_worker``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chaos.testing import (
    AFTER_DEATH_S,
    FAST_HEALTH_CHECKS,
    CheckFailed,
    Experiment,
    Fault,
    FaultNotObserved,
    Kind,
    Source,
    WorkloadError,
    WorkloadRun,
    record,
)

#: Every node imports ray.serve: an image without Serve's dependencies skips the family, with
#: the import error, before any boot.
NEEDS_SERVE = pytest.mark.needs_modules("ray.serve")

WORKERS_2 = [{"name": "worker", "count": 2, "num_cpus": 1}]
#: SERVE-03: room on the survivor for the dead node's replica.
WORKERS_2_ROOMY = [{"name": "worker", "count": 2, "num_cpus": 2}]
WORKERS = ["worker-1", "worker-2"]
ECHO_REPLICA = "ServeReplica:echo:Echo"
PROXY = "ProxyActor"
CONTROLLER = "ServeController"
#: The deployments' ``health_check_period_s`` (Serve's default: 10 s).
PERIOD_S = 1.0
#: ``RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S`` for SERVE-04 (Serve's default: 10 s).
PROXY_PERIOD_S = 2.0
#: A replica's check period is drawn from ``period × U(0.9, 1.1)``
#: (``deployment_state.py``, ``ActorReplicaWrapper._should_start_new_health_check``); a
#: proxy's is not randomized (``proxy_state.py``, ``ProxyState._reconcile_internal``).
JITTER = 1.1
#: The client's request timeout (``workloads.serve_load:load``). 2 s was too short on a shared
#: 2-core host: at load average 40-80 two unrelated clusters' clients timed out in the same
#: seconds (docs/evidence/serve.md, run 4): a host stall, not Serve. 5 s was too short while
#: a head container booted beside three other clusters (run 7): 10 s.
REQUEST_TIMEOUT_S = 10.0
#: How long traffic is watched after a recovery before the next step: the client's QUIET_S
#: window (3 s) and two more of its one-second reports, so ``serving`` holds on answers given
#: after the recovery only.
AFTER_S = 5.0
#: A replica, proxy or controller is a fresh worker process: its start on a loaded host (the
#: same bound as a task's retry after a death: chaos.spec.knobs.AFTER_DEATH_S).
START_S = AFTER_DEATH_S
SERVE_ENV = {
    **FAST_HEALTH_CHECKS,
    "RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S": str(PROXY_PERIOD_S),
}


# -- helpers ----------------------------------------------------------------------------------


def alive(experiment: Experiment, class_name: str) -> list[dict[str, Any]]:
    """The ALIVE actors of ``class_name``, as the State API lists them."""
    return experiment.nemesis.state("actors", class_name=class_name, state="ALIVE")


def node_name(experiment: Experiment, node_id: str) -> str:
    return experiment.cluster.node_by_id(node_id).name


def struck(experiment: Experiment, fault: Fault) -> float:
    """When the strike was proven (its ``verified`` event): the victim is gone by then."""
    for event in experiment.history.events(Kind.VERIFIED, source=Source.NEMESIS):
        if event.t >= fault.injected_at and event.get("target") == fault.target:
            return event.t
    raise FaultNotObserved(f"no verified strike of {fault.target}")


def first_alive(
    experiment: Experiment,
    class_name: str,
    after: float,
    exclude: set[str],
    node_id: str | None = None,
) -> float | None:
    """When the observer first saw a new actor of ``class_name`` ALIVE after ``after``."""
    for event in experiment.history.events(Kind.ACTOR_STATE):
        if (
            event.t >= after
            and event.get("class_name") == class_name
            and event.get("state") == "ALIVE"
            and event.get("actor_id") not in exclude
            and (node_id is None or event.get("node_id") == node_id)
        ):
            return event.t
    return None


def start_load(experiment: Experiment, targets: list[str], stop: str = "load_stop") -> WorkloadRun:
    run = experiment.cluster.run(
        "workloads.serve_load:load",
        targets=targets,
        timeout_s=REQUEST_TIMEOUT_S,
        stop_signal=stop,
        timeout=1200,
    )
    run.wait_for("load_running", timeout=90)
    return run


def stop_load(experiment: Experiment, run: WorkloadRun, stop: str = "load_stop") -> dict[str, Any]:
    experiment.cluster.signal(stop)
    seen: dict[str, Any] = run.result(timeout=60)
    totals = {n: {"ok": t["ok"], "failed": t["failed"]} for n, t in seen["targets"].items()}
    experiment.measure("client: requests per proxy", totals)
    return seen


#: ``serving``: how many of the client's latest seconds may pass without an answer from a
#: proxy before it counts as not answering. One second was too strict beside three other
#: clusters: a host stall left 1 s empty (measured: CI-like run of 4 December, 17:33 UTC),
#: while a proxy that is gone stays silent for longer than this (SERVE-04: 8.5-21 s).
QUIET_S = 3


def serving(run: WorkloadRun, targets: list[str]) -> Callable[[], None]:
    """A check for ``holds_for``: every target answered in the client's latest QUIET_S
    seconds (failed requests are judged on their own, by when they were sent)."""

    def check() -> None:
        recent = run.events("load_second")[-QUIET_S:]
        answered = {t: sum(e.get("ok", {}).get(t, 0) for e in recent) for t in targets}
        quiet = [t for t, n in answered.items() if not n]
        if quiet:
            raise CheckFailed(
                f"no answer in the client's last {len(recent)} s from {quiet}: {answered}"
            )

    return check


def answers_since(run: WorkloadRun, target: str, since: float) -> bool:
    """True once a ``load_second`` after ``since`` counts an answer from ``target``."""
    return any(
        e.t > since and e.get("ok", {}).get(target, 0) > 0 for e in run.events("load_second")
    )


def deploy_echo(experiment: Experiment, proxies: list[str], **options: Any) -> dict[str, Any]:
    deployed: dict[str, Any] = experiment.cluster.run(
        "workloads.serve:deploy_echo", proxies=proxies, timeout=400, **options
    ).result()
    constants = deployed["constants"]
    experiment.measure("Serve constants in the image", constants)
    experiment.measure("proxy implementation", constants["proxy"])
    return deployed


def one_per_worker(experiment: Experiment) -> dict[str, dict[str, Any]]:
    """The echo replicas by node name; set-up must have put one on each worker."""
    rows = alive(experiment, ECHO_REPLICA)
    by_node = {node_name(experiment, r["node_id"]): r for r in rows}
    if len(rows) != 2 or set(by_node) != set(WORKERS):
        where = [(node_name(experiment, r["node_id"]), r["actor_id"][:8]) for r in rows]
        raise WorkloadError(f"set-up: one echo replica per worker expected, found {where}")
    return by_node


def shutdown_serve(experiment: Experiment) -> None:
    """Serve's replicas hold CPUs: shut Serve down so INV-01 (CPU back to total) can hold."""
    experiment.cluster.run("workloads.serve:shutdown", timeout=180).result()


def controller_log(experiment: Experiment, rules: dict[str, str]) -> list[dict[str, Any]]:
    """The Serve controller's own lines matching ``rules`` (name → regex), read from its logs
    on the head (every controller process's file), oldest first, with their time stamps."""
    found: list[dict[str, Any]] = experiment.cluster.run(
        "workloads.serve:logged",
        node=experiment.cluster.head.name,
        files="serve/controller_*.log",
        rules=rules,
        timeout=60,
    ).result()
    return found


def replica_uid(row: dict[str, Any]) -> str:
    """The id the controller's log names a replica by: the last part of its actor's name
    (``SERVE_REPLICA::<app>#<deployment>#<id>``, ``ReplicaID.to_full_id_str``)."""
    name = str(row.get("name") or "")
    if not name.startswith("SERVE_REPLICA::") or "#" not in name:
        raise WorkloadError(f"set-up: a replica actor without its Serve name: {row}")
    return name.rsplit("#", 1)[1]


def record_failures(experiment: Experiment, load: dict[str, Any], label: str) -> None:
    """The client's failed requests (the first 50 per proxy), as evidence."""
    record(experiment, label, {t: v["failures"][:50] for t, v in load["targets"].items()})


def check_now(value: bool) -> None:
    """A check for ``wait_until`` over a flag."""
    if not value:
        raise CheckFailed("not yet")
