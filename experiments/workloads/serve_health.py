"""Ray Serve's health checks and deployments that cannot start (SERVE-02, SERVE-07): a replica
whose ``check_health`` fails on command, a constructor that raises, an import that does not
exist, a resource no node has; each watched through ``serve.status()`` and returned as data.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import ray
from ray import serve
from raychaos_agent import emit, until

from workloads.serve import PORT, connect, describe, read_status, serve_constants, start_serve

PATIENT_APP = "patient"


#: A deliberately broken application's import path (SERVE-07): no such module.
BROKEN_IMPORT = "workloads.raychaos_no_such_module:app"


#: The custom resource no node has (SERVE-07): its replicas wait for it.
ABSENT_RESOURCE = "raychaos_absent"


#: What the constructor of ``Broken`` raises: found again in the status message.
CTOR_ERROR = "raychaos: this constructor refuses to start"


HEALTH_ERROR = "raychaos: check_health fails on purpose"

#: How long a hung ``check_health`` blocks (SERVE-08): 20 × Serve's default timeout
#: (DEFAULT_HEALTH_CHECK_TIMEOUT_S, 30 s, serve/_private/constants.py), far past the one under
#: test; the replica is stopped (and its thread with it) long before.
HANG_S = 600.0


@serve.deployment
class Patient:
    """A replica whose ``check_health`` fails on command (SERVE-02).

    ``set_checks(pattern)``: the next checks fail where ``pattern`` says True, then pass;
    ``set_checks([], always=True)``: every check fails from now on; ``set_hang()``: every check
    from now on blocks (:data:`HANG_S`, in the thread Serve runs a sync method in) and never
    returns (SERVE-08). Every check is appended, with its wall-clock time and outcome (``ok``,
    ``fail``, ``hang``), to a file on the replica's node named after the actor, so the count
    survives the replica.
    """

    def __init__(self) -> None:
        self.pattern: list[bool] = []
        self.always = False
        self.hang = False
        self.actor_id = ray.get_runtime_context().get_actor_id()
        self.node_id = ray.get_runtime_context().get_node_id()
        # The id the controller's log names the replica by.
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        self.log = f"/tmp/raychaos-serve-checks-{self.actor_id}.log"
        self.checks: list[tuple[float, bool]] = []
        self.lock = threading.Lock()

    def check_health(self) -> None:
        with self.lock:
            fail = self.pattern.pop(0) if self.pattern else self.always
            hang = self.hang
            now = time.time()
            self.checks.append((round(now, 3), not fail and not hang))
            with open(self.log, "a") as out:
                out.write(f"{now:.3f} {'hang' if hang else 'fail' if fail else 'ok'}\n")
        if hang:
            time.sleep(HANG_S)  # outside the lock: requests and reports go on
        if fail:
            raise RuntimeError(HEALTH_ERROR)

    def set_hang(self) -> dict[str, Any]:
        with self.lock:
            self.hang = True
        return self.report()

    def set_checks(self, pattern: list[bool], always: bool = False) -> dict[str, Any]:
        with self.lock:
            self.pattern = list(pattern)
            self.always = always
        return self.report()

    def report(self) -> dict[str, Any]:
        with self.lock:
            checks = list(self.checks)
        return {
            "actor_id": self.actor_id,
            "replica_id": self.replica_id,
            "pid": os.getpid(),
            "node_id": self.node_id,
            "log": self.log,
            "n_checks": len(checks),
            "checks": checks[-40:],
            "t": time.time(),
        }

    async def __call__(self, request: Any) -> dict[str, Any]:
        return self.report()


@serve.deployment
class Broken:
    """A constructor that always raises (SERVE-07)."""

    def __init__(self) -> None:
        raise ValueError(CTOR_ERROR)

    async def __call__(self, request: Any) -> str:
        return "never"


@serve.deployment
class Starved:
    """Its replicas ask for :data:`ABSENT_RESOURCE` (SERVE-07): never scheduled."""

    async def __call__(self, request: Any) -> str:
        return "never"


def deploy_patient(health_check_period_s: float, num_cpus: float) -> dict[str, Any]:
    """Deploy ``patient``: one replica with a controllable ``check_health``."""
    connect()
    start_serve()
    app = Patient.options(
        num_replicas=1,
        ray_actor_options={"num_cpus": num_cpus},
        health_check_period_s=health_check_period_s,
        graceful_shutdown_timeout_s=1,
    ).bind()
    handle = serve.run(app, name=PATIENT_APP, route_prefix="/patient")
    return {"constants": serve_constants(), "info": handle.report.remote().result(timeout_s=60)}


def health_rounds(period_s: float, extra_checks: int = 6, timeout: float = 120.0) -> dict[str, Any]:
    """Three rounds against the ``patient`` replica, through its handle.

    ``once``: one failing check between passing ones; ``alternate``: four failing checks, each
    followed by a passing one. Each round waits for ``extra_checks`` more checks after its
    pattern ran and reports whether the same actor still answers. ``always``: every check
    fails; waits until another actor answers and reports when.
    """
    connect()
    handle = serve.get_app_handle(PATIENT_APP)

    def info() -> dict[str, Any]:
        try:
            found: dict[str, Any] = handle.report.remote().result(timeout_s=10)
            return found
        except Exception as exc:  # noqa: BLE001 - a replica being replaced: asked again
            return {"error": describe(exc), "t": time.time()}

    rounds: dict[str, Any] = {}
    for name, pattern in (("once", [True]), ("alternate", [True, False] * 4)):
        before = handle.set_checks.remote(pattern).result(timeout_s=30)
        need = before["n_checks"] + len(pattern) + extra_checks
        after = until(
            info,
            lambda i, b=before, n=need: (
                "actor_id" in i and (i["actor_id"] != b["actor_id"] or i["n_checks"] >= n)
            ),
            timeout,
        )
        same = after.get("actor_id") == before["actor_id"]
        run = after.get("n_checks", 0) - before["n_checks"] if same else 0
        rounds[name] = {
            "before": {k: before[k] for k in ("actor_id", "pid", "node_id", "n_checks")},
            "after": after,
            "same_actor": same,
            "checks_run": run,
            # The checks of this round only (``report`` keeps the last 40).
            "checks": after.get("checks", [])[-run:] if run > 0 else [],
        }
    before = handle.set_checks.remote([], always=True).result(timeout_s=30)
    set_at = time.time()
    emit("always_failing", actor_id=before["actor_id"], node_id=before["node_id"])
    after = until(
        info,
        lambda i: "actor_id" in i and i["actor_id"] != before["actor_id"],
        timeout,
    )
    rounds["always"] = {
        "before": before,
        "set_at": set_at,
        "after": after,
        "replaced": after.get("actor_id") not in (None, before["actor_id"]),
        "new_answered_at": after.get("t"),
    }
    return rounds


def hang_round(
    period_s: float, timeout_s: float, num_cpus: float, timeout: float = 120.0
) -> dict[str, Any]:
    """SERVE-08: ``patient`` deployed again with ``health_check_timeout_s``, two passing checks,
    then every check hangs; asks the replica (through its handle) twice a second until another
    actor answers. Reports the hung replica, when the hang was set (its clock), how many asks
    it answered while hung, and its replacement."""
    connect()
    app = Patient.options(
        num_replicas=1,
        ray_actor_options={"num_cpus": num_cpus},
        health_check_period_s=period_s,
        health_check_timeout_s=timeout_s,
        graceful_shutdown_timeout_s=1,
    ).bind()
    handle = serve.run(app, name=PATIENT_APP, route_prefix="/patient")
    first = handle.report.remote().result(timeout_s=60)
    until(
        lambda: handle.report.remote().result(timeout_s=10),
        lambda i: i["n_checks"] >= first["n_checks"] + 2,
        timeout,
    )
    before = handle.set_hang.remote().result(timeout_s=30)
    emit("hung", actor_id=before["actor_id"], node_id=before["node_id"])
    answered: list[float] = []
    failed: list[dict[str, Any]] = []
    after: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            after = handle.report.remote().result(timeout_s=10)
        except Exception as exc:  # noqa: BLE001 - the replica being replaced: counted
            failed.append({"t": time.time(), "error": describe(exc)})
            after = {}
        if after.get("actor_id") == before["actor_id"]:
            answered.append(after["t"])
        elif after.get("actor_id"):
            break
        time.sleep(0.5)
    return {
        "before": before,
        "hung_at": before["t"],
        "answered_while_hung": len(answered),
        "last_answer": answered[-1] if answered else None,
        "failed": failed[:20],
        "after": after,
        "replaced": after.get("actor_id") not in (None, before["actor_id"]),
    }


def _watch(app: str, done: Any, timeout: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll ``serve.status()`` for ``app`` until ``done(row)`` or ``timeout``; return the last
    row and every change seen (with its time)."""
    changes: list[dict[str, Any]] = []

    def fetch() -> dict[str, Any]:
        row: dict[str, Any] = read_status().get(app, {})
        brief = {
            "status": row.get("status"),
            "deployments": {
                d: (v["status"], v["status_trigger"]) for d, v in row.get("deployments", {}).items()
            },
        }
        if not changes or changes[-1]["brief"] != brief:
            changes.append({"t": round(time.time(), 3), "brief": brief})
        return row

    last = until(fetch, done, timeout)
    return last, changes


def _replica_actors(app: str, deployment: str) -> list[dict[str, Any]]:
    from ray.util.state import list_actors

    rows = list_actors(
        filters=[("class_name", "=", f"ServeReplica:{app}:{deployment}")],
        limit=1000,
        detail=True,
        raise_on_missing_output=False,
    )
    return [{"actor_id": r.actor_id, "state": r.state, "pid": r.pid} for r in rows]


def _deploy_nowait(app: Any, name: str) -> dict[str, Any]:
    """Start deploying without waiting for RUNNING (``serve.run`` waits, and raises on
    DEPLOY_FAILED): in a thread, whose outcome is reported."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            serve.run(app, name=name, route_prefix=f"/{name}")
            outcome["returned_at"] = time.time()
        except Exception as exc:  # noqa: BLE001 - the documented outcome for a failed deploy
            outcome["raised"] = describe(exc)
            outcome["raised_at"] = time.time()

    threading.Thread(target=run, daemon=True, name=f"deploy-{name}").start()
    return outcome


def start_failures(
    dashboard: str, slow_s: float, hold_s: float = 10.0, timeout: float = 180.0
) -> dict[str, Any]:
    """SERVE-07's three cases, one after the other, each read from ``serve.status()``.

    ``ctor``: ``Broken`` (1 replica) until DEPLOY_FAILED; its replica actors counted then and
    again ``hold_s`` later. ``import``: a declarative deploy (REST ``PUT`` on the dashboard)
    of :data:`BROKEN_IMPORT` until DEPLOY_FAILED. ``resources``: ``Starved`` (1 replica asking
    for :data:`ABSENT_RESOURCE`) until its message says it waits to be scheduled (Serve's slow
    start warning comes after ``slow_s``), then watched ``hold_s`` more.
    """
    connect()
    start_serve()
    terminal = ("DEPLOY_FAILED", "RUNNING")
    out: dict[str, Any] = {"constants": serve_constants()}

    broken = Broken.options(num_replicas=1, ray_actor_options={"num_cpus": 0.1}).bind()
    deploy = _deploy_nowait(broken, "broken-ctor")
    t0 = time.time()
    row, changes = _watch("broken-ctor", lambda r: r.get("status") in terminal, timeout)
    failed_at = time.time()
    actors = _replica_actors("broken-ctor", "Broken")
    later = until(lambda: _replica_actors("broken-ctor", "Broken"), lambda _: False, hold_s)
    out["ctor"] = {
        "started": t0,
        "status": row,
        "changes": changes,
        "to_terminal_s": round(failed_at - t0, 2),
        "replica_actors": actors,
        "replica_actors_later": later,
        "serve_run": deploy,
    }

    config = {
        "http_options": {"host": "0.0.0.0", "port": PORT},
        "applications": [
            {
                "name": "broken-import",
                "route_prefix": "/broken-import",
                "import_path": BROKEN_IMPORT,
            }
        ],
    }
    request = urllib.request.Request(
        f"{dashboard}/api/serve/applications/",
        data=json.dumps(config).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    t0 = time.time()
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            put = {"code": reply.status}
    except urllib.error.HTTPError as exc:
        put = {"code": exc.code, "body": exc.read(2000).decode(errors="replace")}
    row, changes = _watch("broken-import", lambda r: r.get("status") in terminal, timeout)
    out["import"] = {
        "put": put,
        "status": row,
        "changes": changes,
        "to_terminal_s": round(time.time() - t0, 2),
    }

    starved = Starved.options(
        num_replicas=1, ray_actor_options={"num_cpus": 0, "resources": {ABSENT_RESOURCE: 1}}
    ).bind()
    deploy = _deploy_nowait(starved, "starved")
    t0 = time.time()

    def waiting(r: dict[str, Any]) -> bool:
        dep = r.get("deployments", {}).get("Starved", {})
        return "to be scheduled" in (dep.get("message") or "")

    row, changes = _watch("starved", waiting, slow_s * 2 + timeout / 2)
    warned_at = time.time()
    held, more = _watch("starved", lambda r: r.get("status") in ("DEPLOY_FAILED",), hold_s)
    out["resources"] = {
        "status": row,
        "warned_after_s": round(warned_at - t0, 2),
        "held": held,
        "changes": changes + more,
        "replica_actors": _replica_actors("starved", "Starved"),
        "serve_run": deploy,
    }
    for app in ("broken-ctor", "starved"):
        serve.delete(app)
    return out
