"""Node and raylet failure workloads (claims NODE-01 … NODE-04).

Convention (as in ``workloads.tasks``): the Ray exceptions under test are caught and returned as
``describe(exc)`` inside the result dict; the workload raises only on set-up problems.

The workloads detect node death themselves by polling ``ray.nodes()`` (no dashboard needed) and
report the GCS's death record (``DeathReason``, ``DeathReasonMessage`` on 2.59+/2.60) and the
State API's ``state_message``, with wall-clock times the host compares with its strike time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import ray
from raychaos_agent import emit, node_id_of, pin

from workloads.actors import Stateful, _final_actor_row, _probe_until
from workloads.tasks import (
    _long_task,
    _token,
    connect,
    describe,
    make_tally,
    node_record,
    state_node,
    task_attempts,
    wait_node_dead,
)


def node_death(
    on: str = "worker-1",
    busy: bool = True,
    wait_s: float = 120.0,
) -> dict[str, Any]:
    """NODE-01 / NODE-02 / NODE-04: what the driver sees when ``on`` goes away.

    With ``busy`` a long task (``max_retries=0``) and an actor (``max_restarts=0``), both
    hard-pinned, run on ``on``. Emits ``node_busy`` (``node_id``, ``node_name``,
    ``actor_pid``) — HOST: strike now (``container.kill()`` for NODE-01, ``pkill -9 -x
    raylet`` for NODE-02, ``ray stop`` inside the node for NODE-04). Returns the task's and the
    actor's errors with times, ``t_dead_seen`` (first ``ray.nodes()`` poll that shows the node
    not Alive), the ``ray.nodes()`` record, the State API node row and the actor's death cause.
    """
    connect()
    nid = node_id_of(on)
    out: dict[str, Any] = {"node_id": nid, "node_name": on}
    box: dict[str, Any] = {}
    threads: list[threading.Thread] = []
    actor_id = None
    if busy:
        tally = make_tally()
        key = _token("busy")
        ref = _long_task.options(name=key, max_retries=0, scheduling_strategy=pin(on)).remote(
            tally, key, 600
        )
        # num_cpus=0: the task already holds the node's only CPU.
        actor = Stateful.options(num_cpus=0, max_restarts=0, scheduling_strategy=pin(on)).remote()
        first = ray.get(actor.ping.remote(), timeout=120)
        actor_id = first["actor_id"]
        deadline = time.monotonic() + 120
        while not ray.get(tally.get.remote(key)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"task never started on {on}")
            time.sleep(0.1)

        def task_wait() -> None:
            try:
                box["task_value"] = ray.get(ref, timeout=wait_s)
                box["task_error"] = None
            except Exception as exc:  # noqa: BLE001
                box["task_error"] = describe(exc)
            box["t_task_outcome"] = time.time()

        def actor_wait() -> None:
            probe = _probe_until(actor, "final", wait_s)
            box["actor_errors"] = probe["errors"]
            box["t_actor_final"] = probe["t"]

        threads = [threading.Thread(target=task_wait), threading.Thread(target=actor_wait)]
        for t in threads:
            t.start()
        emit("node_busy", node_id=nid, node_name=on, actor_pid=first["pid"], task=key)
    else:
        emit("node_busy", node_id=nid, node_name=on)
    dead = wait_node_dead(nid, wait_s=wait_s)
    out.update(
        {
            "dead": dead["dead"],
            "t_dead_seen": dead["t_dead_seen"],
            "ray_nodes_record": dead["record"],
        }
    )
    for t in threads:
        t.join(wait_s)
    out.update(box)
    out["state_api_node"] = state_node(nid, want="DEAD")
    if busy:
        out["task_attempts"] = task_attempts(key, wait_s=5)
        out["actor_state_api"] = _final_actor_row(actor_id) if actor_id else None
    return out


def node_rejoins(
    on: str = "worker-1",
    wait_s: float = 180.0,
) -> dict[str, Any]:
    """NODE-03: ``on`` dies and is restarted on the same container and IP.

    Emits ``node_known`` (``node_id``) — HOST: kill the node (container or raylet) — then
    ``old_node_dead`` once ``ray.nodes()`` shows it not Alive — HOST: restart it (``docker
    start`` the container, or ``ray stop --force`` + the original ``ray start`` inside it).
    The workload waits for an ALIVE node at the same IP and returns the old and new ids, both
    ``ray.nodes()`` records and State API rows, and whether a task pinned to the new node runs.
    """
    connect()
    from raychaos_agent import node_ip

    ip = node_ip(on)
    old = node_id_of(on)
    emit("node_known", node_id=old, node_name=on, ip=ip)
    dead = wait_node_dead(old, wait_s=wait_s)
    emit("old_node_dead", node_id=old, t_dead_seen=dead["t_dead_seen"])
    new = None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        alive = [n["NodeID"] for n in ray.nodes() if n["NodeManagerAddress"] == ip and n["Alive"]]
        if alive:
            new = alive[0]
            break
        time.sleep(0.2)
    out: dict[str, Any] = {
        "ip": ip,
        "old_node_id": old,
        "new_node_id": new,
        "t_dead_seen": dead["t_dead_seen"],
        "t_new_alive_seen": time.time() if new else None,
        "same_id": new == old,
    }
    emit("new_node_alive", node_id=new)
    rows = [n for n in ray.nodes() if n["NodeManagerAddress"] == ip]
    out["ray_nodes_at_ip"] = [
        {
            k: v
            for k, v in n.items()
            if k in ("NodeID", "Alive", "DeathReason", "DeathReasonMessage", "NodeName")
        }
        for n in rows
    ]
    out["old_record"] = node_record(old)
    out["state_api_old"] = state_node(old, want="DEAD")
    out["state_api_new"] = state_node(new, want="ALIVE") if new else None
    if new:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:
            tally = make_tally()
            r = ray.get(
                _long_task.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(new, soft=False)
                ).remote(tally, _token("rejoin"), 0),
                timeout=60,
            )
            out["task_on_new"] = r["node_id"] == new
        except Exception as exc:  # noqa: BLE001
            out["task_on_new_error"] = describe(exc)
    return out
