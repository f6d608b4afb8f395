"""Actor fault-tolerance workloads (claims ACTOR-01 … ACTOR-05).

Convention (as in ``workloads.tasks``): the Ray exception under test is caught and returned as
``describe(exc)`` inside the result dict; the workload raises only on set-up problems.

Kills: ``kill="self"`` makes the actor SIGKILL its own worker process (no host step);
``kill="host"`` emits an event naming the actor's ``pid``, ``node_id`` and ``node_name`` and
waits — HOST: ``cluster.exec(node_name, ["kill", "-9", str(pid)])`` for a process death, or
kill the node's container (or raylet) for a node death.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any

import ray
from raychaos_agent import emit, node_id, node_id_of, pin, until

from workloads.tasks import _jsonable, connect, describe, name_of

MB = 1024 * 1024


@ray.remote(num_cpus=1)
class Stateful:
    """Counts calls in memory; ``__init__`` runs again on every restart."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[int] = []
        self.started = time.time()

    def ping(self) -> dict[str, Any]:
        self.calls += 1
        return {
            "pid": os.getpid(),
            "node_id": node_id(),
            "calls": self.calls,
            "started": self.started,
            "actor_id": ray.get_runtime_context().get_actor_id(),
        }

    def step(self, i: int, sleep_s: float = 0.0, log: str | None = None) -> dict[str, Any]:
        if sleep_s:
            time.sleep(sleep_s)
        self.seen.append(i)
        if log:
            # On the node's disk before the reply leaves: proof the call ran even when its
            # reply dies with the process.
            with open(log, "a") as out:
                out.write(f"{i}\n")
        return {"i": i, "pid": os.getpid(), "local_seq": len(self.seen)}

    def executed(self, log: str) -> list[int]:
        """Every ``step`` that ran on this node with ``log``, in order."""
        if not os.path.exists(log):
            return []
        with open(log) as lines:
            return [int(line) for line in lines if line.strip()]

    def die(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def die_once(self, marker: str) -> str:
        """SIGKILL the process the first time only (a marker file on this node remembers)."""
        path = f"/tmp/{marker}"
        if not os.path.exists(path):
            open(path, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return "survived"

    def big(self, size_mb: float) -> Any:

        return bytes([9]) * int(size_mb * MB)

    def where(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "node_id": node_id(),
            "actor_id": ray.get_runtime_context().get_actor_id(),
        }


def _actor_rows(actor_id: str) -> dict[str, Any] | None:
    from ray.util.state import list_actors

    try:
        rows = list_actors(
            filters=[("actor_id", "=", actor_id)], detail=True, raise_on_missing_output=False
        )
    except Exception as exc:  # noqa: BLE001
        return {"state_api_error": f"{type(exc).__name__}: {exc}"[:300]}
    if not rows:
        return None
    a = rows[0]
    return {
        k: _jsonable(getattr(a, k, None))
        for k in ("state", "num_restarts", "death_cause", "node_id", "pid", "name")
    }


class _StateWatcher:
    """Samples the actor's State API state in the background; records each transition."""

    def __init__(self, actor_id: str, period: float = 0.25) -> None:
        self.actor_id = actor_id
        self.period = period
        self.transitions: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        last = None
        while not self._stop.is_set():
            row = _actor_rows(self.actor_id)
            if row and "state" in row:
                key = (row["state"], row.get("num_restarts"))
                if key != last:
                    last = key
                    self.transitions.append(
                        {
                            "t": time.time(),
                            "state": row["state"],
                            "num_restarts": row.get("num_restarts"),
                        }
                    )
            self._stop.wait(self.period)

    def stop(self, after: str | None = None, wait_s: float = 30.0) -> list[dict[str, Any]]:
        """Stop sampling; with ``after``, first wait (bounded) until that state was recorded."""
        deadline = time.monotonic() + wait_s
        while after and time.monotonic() < deadline:
            if self.transitions and self.transitions[-1]["state"] == after:
                break
            time.sleep(self.period)
        self._stop.set()
        self._thread.join(5)
        return self.transitions


def _final_actor_row(actor_id: str, wait_s: float = 15) -> dict[str, Any] | None:
    """Poll the State API until the actor is DEAD (it lags about a second)."""
    return until(
        lambda: _actor_rows(actor_id), lambda row: (row or {}).get("state") == "DEAD", wait_s
    )


def _probe_until(actor: Any, want: str, wait_s: float, call_timeout: float = 5) -> dict[str, Any]:
    """Ping until ``want`` happens: "error" (any failure) / "final" (a non-Unavailable
    ``RayActorError``) / "ok" (a successful call; a final error ends the wait too). Records
    every distinct error seen."""
    errors: list[dict[str, Any]] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            value = ray.get(actor.ping.remote(), timeout=call_timeout)
            if want == "ok":
                return {"ok": value, "errors": errors, "t": time.time()}
        except ray.exceptions.GetTimeoutError as exc:
            errors.append({"t": time.time(), **describe(exc)})
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            info = {"t": time.time(), **describe(exc)}
            if not errors or errors[-1]["type"] != info["type"]:
                errors.append(info)
            final = isinstance(exc, ray.exceptions.RayActorError) and not isinstance(
                exc, getattr(ray.exceptions, "ActorUnavailableError", ())
            )
            if want == "error" or final:  # a final death also ends a wait for "ok"
                return {"errors": errors, "t": time.time()}
        time.sleep(0.2)
    return {"errors": errors, "timed_out": True, "t": time.time()}


def _strike(actor: Any, kill: str, round_: int) -> dict[str, Any]:
    where = ray.get(actor.where.remote(), timeout=60)
    info = {
        "round": round_,
        "pid": where["pid"],
        "node_id": where["node_id"],
        "node_name": name_of(where["node_id"]),
        "t_alive": time.time(),
    }
    emit("actor_alive", **info)
    if kill == "self":
        actor.die.remote()
    return info


def actor_dies(
    on: str = "worker-1",
    kill: str = "self",
    max_restarts: int = 0,
    wait_s: float = 120.0,
) -> dict[str, Any]:
    """ACTOR-01: an actor (``max_restarts`` 0 by default) hard-pinned to ``on`` dies.

    Emits ``actor_alive`` (``pid``, ``node_id``, ``node_name``); with ``kill="host"`` the host
    kills the pid or the node. The workload pings until a *final* error (a ``RayActorError``
    that is not ``ActorUnavailableError``), recording every distinct error type in order, then
    reads the State API row (``state``, ``death_cause``). Returns ``errors``, ``t_final``,
    ``state_api``.
    """
    connect()
    actor = Stateful.options(max_restarts=max_restarts, scheduling_strategy=pin(on)).remote()
    actor_id = ray.get(actor.ping.remote(), timeout=120)["actor_id"]
    info = _strike(actor, kill, 0)
    probe = _probe_until(actor, "final", wait_s)
    emit("actor_final_error", types=[e["type"] for e in probe["errors"]])
    out: dict[str, Any] = {
        "actor_id": actor_id,
        "struck": info,
        "errors": probe["errors"],
        "t_final": probe["t"],
        "timed_out": probe.get("timed_out", False),
    }
    out["state_api"] = _final_actor_row(actor_id)
    return out


def actor_restarts(
    on: str = "worker-1",
    kill: str = "self",
    max_restarts: int = 1,
    deaths: int = 2,
    soft: bool = True,
    wait_s: float = 120.0,
) -> dict[str, Any]:
    """ACTOR-02: an actor with ``max_restarts`` pinned (``soft`` by default, so a restart can
    go to another node) to ``on`` is killed ``deaths`` times. Each round: three calls build
    up in-memory state, ``actor_alive`` is emitted (``round``, ``pid``, ``node_name``) — with
    ``kill="host"`` the HOST kills that pid/node now — then the workload pings until the next
    successful call (restart) or a final error. Returns per-round ``calls`` before the strike
    and after the restart, ``state_reset`` (the answering instance's ``__init__`` ran after the
    strike), the new pid/node, restart duration, the
    State API transitions (RESTARTING/ALIVE/DEAD with ``num_restarts``) and the final row.
    """
    connect()
    actor = Stateful.options(
        max_restarts=max_restarts, scheduling_strategy=pin(on, soft=soft)
    ).remote()
    actor_id = ray.get(actor.ping.remote(), timeout=120)["actor_id"]
    watcher = _StateWatcher(actor_id)
    rounds: list[dict[str, Any]] = []
    for r in range(deaths):
        for _ in range(3):
            before = ray.get(actor.ping.remote(), timeout=60)
        info = _strike(actor, kill, r)
        info["calls_before"] = before["calls"]
        broke = _probe_until(actor, "error", wait_s)
        back = _probe_until(actor, "ok", wait_s) if not broke.get("timed_out") else broke
        info["errors_during"] = [e["type"] for e in broke["errors"] + back["errors"]]
        if "ok" in back:
            info.update(
                {
                    "restarted": True,
                    "after": back["ok"],
                    "after_node_name": name_of(back["ok"]["node_id"]),
                    # A fresh __init__ ran after the strike. (Not "calls == 1": a ping whose
                    # bounded get timed out during the outage still runs on the new instance.)
                    "state_reset": back["ok"]["started"] > info["t_alive"],
                    "restart_s": round(back["t"] - info["t_alive"], 2),
                }
            )
        else:
            info.update({"restarted": False, "final_errors": back["errors"][-1:]})
            rounds.append(info)
            break
        rounds.append(info)
    # The State API lags the GCS (several seconds on a loaded host): wait for the final DEAD.
    dead = not rounds[-1]["restarted"]
    final = _final_actor_row(actor_id, wait_s=30) if dead else _actor_rows(actor_id)
    return {
        "actor_id": actor_id,
        "max_restarts": max_restarts,
        "rounds": rounds,
        "state_transitions": watcher.stop(after="DEAD" if dead else None),
        "state_api": final,
    }


def calls_during_restart(
    on: str = "worker-1",
    max_task_retries: int = 0,
    calls: int = 40,
    die_at: int = 10,
    sleep_s: float = 0.05,
) -> dict[str, Any]:
    """ACTOR-03: an actor (``max_restarts=1``, ``max_task_retries`` as given) gets ``calls``
    ``step(i)`` calls submitted at once; call number ``die_at`` is a ``die_once`` that SIGKILLs
    the actor process (no host step). Returns the outcome of every call in submission order:
    ``ok`` (with the pid that ran it and its position in that incarnation) or the error type,
    plus ``order_kept`` (post-restart calls ran in submission order) and counts.
    """
    connect()
    actor = Stateful.options(
        max_restarts=1, max_task_retries=max_task_retries, scheduling_strategy=pin(on)
    ).remote()
    ray.get(actor.ping.remote(), timeout=120)
    marker = f"raychaos-die-{os.urandom(4).hex()}"
    log = f"/tmp/{marker}.steps"
    refs = []
    for i in range(calls):
        if i == die_at:
            refs.append(actor.die_once.remote(marker))
        else:
            refs.append(actor.step.remote(i, sleep_s, log))
    emit("calls_submitted", calls=calls, die_at=die_at)
    results: list[dict[str, Any]] = []
    for i, ref in enumerate(refs):
        try:
            value = ray.get(ref, timeout=120)
            results.append({"i": i, "ok": value})
        except Exception as exc:  # noqa: BLE001
            d = describe(exc)
            results.append({"i": i, "error": d["type"], "bases": d["bases"]})
    ok = [r for r in results if "ok" in r and isinstance(r["ok"], dict)]
    pids = sorted({r["ok"]["pid"] for r in ok})
    order_kept = all(
        [r["ok"]["i"] for r in ok if r["ok"]["pid"] == pid]
        == sorted(r["ok"]["i"] for r in ok if r["ok"]["pid"] == pid)
        for pid in pids
    )
    errors: dict[str, int] = {}
    for r in results:
        if "error" in r:
            errors[r["error"]] = errors.get(r["error"], 0) + 1

    # The restarted incarnation (same node: hard affinity) reads which calls ran; until it is
    # ALIVE again a call fails at once (ActorUnavailableError, max_task_retries=0).
    def read_log() -> list[int] | None:
        try:
            return ray.get(actor.executed.remote(log), timeout=30)
        except ray.exceptions.ActorUnavailableError:
            return None

    executed = until(read_log, lambda seen: seen is not None, timeout=120)
    return {
        "max_task_retries": max_task_retries,
        "results": results,
        "executed": executed,
        "pids": pids,
        "ok_count": len(ok),
        "error_counts": errors,
        "order_kept": order_kept,
    }


@ray.remote(num_cpus=0, max_restarts=0)
class Parent:
    """Creates child actors, so it is their owner."""

    def spawn(self, child_node_id: str, max_restarts: int, detached_name: str) -> list[Any]:
        # Only the driver knows raychaos node names (RAYCHAOS_NODES): take a Ray node id here.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        where = NodeAffinitySchedulingStrategy(child_node_id, soft=True)
        # num_cpus=0: a soft pin waits (does not spill) while its node is merely busy.
        child = Stateful.options(
            num_cpus=0, max_restarts=max_restarts, scheduling_strategy=where
        ).remote()
        detached = Stateful.options(
            num_cpus=0,
            name=detached_name,
            namespace="raychaos",
            lifetime="detached",
            max_restarts=max_restarts,
            scheduling_strategy=where,
        ).remote()
        ray.get([child.ping.remote(), detached.ping.remote()])
        return [child, detached]

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "node_id": node_id()}

    def die(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def owner_dies(
    parent_on: str = "worker-1",
    child_on: str = "worker-2",
    kill: str = "self",
    max_restarts: int = 3,
    wait_s: float = 60.0,
) -> dict[str, Any]:
    """ACTOR-04: a ``Parent`` actor on ``parent_on`` creates a non-detached child and a detached
    named child (both ``max_restarts``) on ``child_on`` and hands their handles to the driver.
    Then the parent dies: ``kill="self"`` (it SIGKILLs itself) or ``"host"`` (emits
    ``parent_alive`` with ``pid``/``node_name``; HOST kills the pid or the node). Returns what
    the non-detached child's calls raise, its State API row (``death_cause``), and whether the
    detached child still answers (it is killed at the end).
    """
    connect()
    parent = Parent.options(scheduling_strategy=pin(parent_on)).remote()
    where = ray.get(parent.where.remote(), timeout=120)
    name = f"raychaos-detached-{os.urandom(4).hex()}"
    child, detached = ray.get(
        parent.spawn.remote(node_id_of(child_on), max_restarts, name), timeout=120
    )
    child_id = ray.get(child.ping.remote(), timeout=60)["actor_id"]
    detached_id = ray.get(detached.ping.remote(), timeout=60)["actor_id"]
    emit(
        "parent_alive",
        pid=where["pid"],
        node_id=where["node_id"],
        node_name=name_of(where["node_id"]),
    )
    if kill == "self":
        parent.die.remote()
    t0 = time.time()
    probe = _probe_until(child, "final", wait_s)
    out: dict[str, Any] = {
        "child_errors": probe["errors"],
        "t_parent_strike": t0,
        "t_child_final": probe["t"],
        "timed_out": probe.get("timed_out"),
    }
    out["child_state_api"] = _final_actor_row(child_id)
    try:
        again = ray.get_actor(name, namespace="raychaos")
        out["detached_after"] = ray.get(again.ping.remote(), timeout=30)
        out["detached_error"] = None
    except Exception as exc:  # noqa: BLE001
        out["detached_error"] = describe(exc)
    out["detached_state_api"] = _actor_rows(detached_id)
    with contextlib.suppress(Exception):  # already gone
        ray.kill(ray.get_actor(name, namespace="raychaos"))
    return out


def actor_output_lost(
    on: str = "worker-1",
    max_restarts: int = 1,
    max_task_retries: int = 0,
    size_mb: float = 4,
    get_timeout_s: float = 90.0,
) -> dict[str, Any]:
    """ACTOR-05: an actor soft-pinned to ``on`` returns a ``size_mb`` MiB object (plasma,
    on ``on``); the driver waits with ``fetch_local=False`` and emits ``object_ready``
    (``node_id``, ``node_name``) — HOST: kill that node. After the death is seen the driver
    reads the object. Expected: reconstructed (by re-running the method on the restarted
    actor) only when ``max_task_retries != 0``; otherwise an ``ObjectLostError`` subclass.
    """
    connect()
    actor = Stateful.options(
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
        scheduling_strategy=pin(on, soft=True),
    ).remote()
    where = ray.get(actor.where.remote(), timeout=120)
    ref = actor.big.remote(size_mb)
    ready, _ = ray.wait([ref], fetch_local=False, timeout=120)
    if not ready:
        raise RuntimeError("actor task did not finish")
    emit(
        "object_ready",
        node_id=where["node_id"],
        node_name=name_of(where["node_id"]),
        pid=where["pid"],
    )
    from workloads.tasks import wait_node_dead

    dead = wait_node_dead(where["node_id"], wait_s=90)
    out: dict[str, Any] = {
        "max_restarts": max_restarts,
        "max_task_retries": max_task_retries,
        "t_dead_seen": dead["t_dead_seen"],
    }
    try:
        value = ray.get(ref, timeout=get_timeout_s)
        out["value"] = {"nbytes": len(value)}
        out["error"] = None
    except Exception as exc:  # noqa: BLE001
        out["error"] = describe(exc)
    out["t_outcome"] = time.time()
    try:
        out["actor_after"] = ray.get(actor.where.remote(), timeout=30)
        out["actor_after"]["node_name"] = name_of(out["actor_after"]["node_id"])
    except Exception as exc:  # noqa: BLE001
        out["actor_after_error"] = describe(exc)["type"]
    return out
