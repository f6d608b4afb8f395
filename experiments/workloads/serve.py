"""Ray Serve workloads (claims SERVE-01 … SERVE-07).

Two kinds of process run on the node hosting the drivers (the driver node, or the head):

- ``load`` is the client: plain HTTP (``urllib``) against chosen proxies, no Ray at all, so
  it keeps counting whatever happens to the cluster (a GCS outage included). It reports every
  request's outcome: successes as completion times and the replica actor that answered,
  failures with their send and end times and the error, and one ``load_second`` event a
  second (per target: answered, failed).
- the others connect to Ray (``ray.init``) to deploy applications, drive a replica's health
  check through a handle, or read ``serve.status()``; they return what they saw as data.

Applications are deployed with the proxies on ``0.0.0.0:8000`` on every node that hosts a
replica (Serve's ``EveryNode``, plus the head), so the client reaches each worker's proxy at
``http://<worker ip>:8000``. Outcomes under test are returned as data; a workload raises only
when its set-up failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

import ray
from ray import serve
from raychaos_agent import emit, node_ip, nodes, until, wait_signal

from workloads.tasks import RAY_LOGS

#: Every proxy listens here (``http_options``); the suite publishes no port.
PORT = 8000
ECHO_APP = "echo"
ECHO_ROUTE = "/echo"
PATIENT_APP = "patient"
#: A deliberately broken application's import path (SERVE-07): no such module.
BROKEN_IMPORT = "workloads.raychaos_no_such_module:app"
#: The custom resource no node has (SERVE-07): its replicas wait for it.
ABSENT_RESOURCE = "raychaos_absent"
#: What the constructor of ``Broken`` raises: found again in the status message.
CTOR_ERROR = "raychaos: this constructor refuses to start"
HEALTH_ERROR = "raychaos: check_health fails on purpose"


def connect() -> None:
    ray.init(namespace="raychaos-serve", log_to_driver=False)


def _describe(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "bases": [c.__name__ for c in type(exc).__mro__[1:] if c is not object],
        "message": str(exc)[:3000],
    }


# -- deployments ----------------------------------------------------------------------------


@serve.deployment
class Echo:
    """Answers with who answered (actor id, pid, node id) after ``delay_s``, so requests are
    in flight when a fault strikes. ``user_config`` sets the version it reports (a
    lightweight update: the same replicas, reconfigured)."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.delay_s = delay_s
        self.version = "v1"
        self.actor_id = ray.get_runtime_context().get_actor_id()
        self.node_id = ray.get_runtime_context().get_node_id()

    def reconfigure(self, config: dict[str, Any]) -> None:
        self.version = str(config.get("version", self.version))

    async def __call__(self, request: Any) -> dict[str, Any]:
        await asyncio.sleep(self.delay_s)  # the work itself: a request in flight
        return {
            "actor_id": self.actor_id,
            "pid": os.getpid(),
            "node_id": self.node_id,
            "version": self.version,
        }


@serve.deployment
class Patient:
    """A replica whose ``check_health`` fails on command (SERVE-02).

    ``set_checks(pattern)``: the next checks fail where ``pattern`` says True, then pass;
    ``set_checks([], always=True)``: every check fails from now on. Every check is appended, with its
    wall-clock time and outcome, to a file on the replica's node named after the actor, so the
    count of failures survives the replica.
    """

    def __init__(self) -> None:
        self.pattern: list[bool] = []
        self.always = False
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
            now = time.time()
            self.checks.append((round(now, 3), not fail))
            with open(self.log, "a") as out:
                out.write(f"{now:.3f} {'fail' if fail else 'ok'}\n")
        if fail:
            raise RuntimeError(HEALTH_ERROR)

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


# -- what the image says ----------------------------------------------------------------------


def serve_constants() -> dict[str, Any]:
    """The Serve constants of the release in the image (read, never assumed) and which proxy
    implementation it runs."""
    from ray.serve._private import constants as c
    from ray.serve._private import deployment_state as ds

    names = (
        "REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD",
        "PROXY_HEALTH_CHECK_UNHEALTHY_THRESHOLD",
        "PROXY_HEALTH_CHECK_PERIOD_S",
        "PROXY_HEALTH_CHECK_TIMEOUT_S",
        "PROXY_READY_CHECK_TIMEOUT_S",
        "DEFAULT_HEALTH_CHECK_PERIOD_S",
        "DEFAULT_HEALTH_CHECK_TIMEOUT_S",
        "MAX_PER_REPLICA_RETRY_COUNT",
        "DEFAULT_CONSTRUCTOR_RETRY_COUNT",
        "MAX_DEPLOYMENT_CONSTRUCTOR_RETRY_COUNT",
        "CONTROL_LOOP_INTERVAL_S",
        "CONTROLLER_HEALTH_CHECK_RECONCILIATION_FRACTION",
        "RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING",
        "RAY_SERVE_QUEUE_LENGTH_CACHE_TIMEOUT_S",
        "RAY_SERVE_KV_TIMEOUT_S",
        "RAY_SERVE_ENABLE_HA_PROXY",
        "RAY_SERVE_ENABLE_DIRECT_INGRESS",
    )
    found: dict[str, Any] = {n: getattr(c, n, None) for n in names}
    for name in ("SLOW_STARTUP_WARNING_S", "SLOW_STARTUP_WARNING_PERIOD_S"):
        found[name] = getattr(ds, name, None)
    found["proxy"] = "haproxy" if found["RAY_SERVE_ENABLE_HA_PROXY"] else "ProxyActor (uvicorn)"
    found["ray_version"] = ray.__version__
    return found


# -- deploy, probe, shut down -----------------------------------------------------------------


def _http(url: str, timeout: float) -> tuple[int | None, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except Exception as exc:  # noqa: BLE001 - any failure to answer is "not serving"
        return None, type(exc).__name__


def _start_serve() -> None:
    serve.start(http_options={"host": "0.0.0.0", "port": PORT})


def _echo(
    num_replicas: int,
    num_cpus: float,
    health_check_period_s: float,
    max_replicas_per_node: int | None,
    delay_s: float,
    version: str = "v1",
) -> Any:
    """The ``echo`` application; the same arguments with another ``version`` are a lightweight
    update (``user_config`` only: the same replicas, reconfigured)."""
    options: dict[str, Any] = {
        "num_replicas": num_replicas,
        "ray_actor_options": {"num_cpus": num_cpus},
        "health_check_period_s": health_check_period_s,
        "user_config": {"version": version},
    }
    if max_replicas_per_node is not None:
        options["max_replicas_per_node"] = max_replicas_per_node
    return Echo.options(**options).bind(delay_s)


def deploy_echo(
    num_replicas: int,
    num_cpus: float,
    proxies: list[str],
    health_check_period_s: float = 1.0,
    max_replicas_per_node: int | None = None,
    delay_s: float = 0.05,
    timeout: float = 180.0,
) -> dict[str, Any]:
    """Deploy ``echo`` (``serve.run`` waits until it is RUNNING) and wait until the proxy of
    every node in ``proxies`` answers ``/echo``. Returns the constants and who answered."""
    connect()
    _start_serve()
    app = _echo(num_replicas, num_cpus, health_check_period_s, max_replicas_per_node, delay_s)
    serve.run(app, name=ECHO_APP, route_prefix=ECHO_ROUTE)
    urls = {name: f"http://{node_ip(name)}:{PORT}{ECHO_ROUTE}" for name in proxies}
    seen = until(
        lambda: {name: _http(url, 5.0) for name, url in urls.items()},
        lambda got: all(code == 200 for code, _ in got.values()),
        timeout,
    )
    answering = {name: code for name, (code, _) in seen.items()}
    if any(code != 200 for code in answering.values()):
        raise RuntimeError(f"set-up: proxies not answering {ECHO_ROUTE}: {seen}")
    return {"constants": serve_constants(), "proxies": answering, "urls": urls}


def deploy_patient(health_check_period_s: float, num_cpus: float) -> dict[str, Any]:
    """Deploy ``patient``: one replica with a controllable ``check_health``."""
    connect()
    _start_serve()
    app = Patient.options(
        num_replicas=1,
        ray_actor_options={"num_cpus": num_cpus},
        health_check_period_s=health_check_period_s,
        graceful_shutdown_timeout_s=1,
    ).bind()
    handle = serve.run(app, name=PATIENT_APP, route_prefix="/patient")
    return {"constants": serve_constants(), "info": handle.report.remote().result(timeout_s=60)}


#: The controller's verdict (``deployment_state.py``, ``ActorReplicaWrapper.check_health``):
#: "Replica <id> failed the health check <n> times in a row, marking it unhealthy."
_VERDICT = re.compile(r"failed the health check (\d+) times in a row, marking it unhealthy")
_SERVE_STAMP = re.compile(r"^\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def unhealthy_verdicts(replica_id: str) -> list[dict[str, Any]]:
    """The controller's "marking it unhealthy" lines for ``replica_id``, read from its logs on
    this node (the head): when (its local clock, ms) and after how many failures in a row."""
    found: list[dict[str, Any]] = []
    for path in sorted(glob.glob(f"{RAY_LOGS}/serve/controller_*.log")):
        with open(path, errors="replace") as log:
            for line in log:
                verdict = _VERDICT.search(line)
                stamp = _SERVE_STAMP.match(line)
                if verdict and stamp and replica_id in line:
                    when = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    found.append({"t": when, "in_a_row": int(verdict[1]), "line": line.strip()})
    return found


#: A C++ component's line (raylet, GCS): ``[2026-12-02 17:23:51,744 I 123 456] …``.
_CPP_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def logged(files: str, rules: dict[str, str], limit: int = 400) -> list[dict[str, Any]]:
    """Every line of the logs ``files`` (a glob under Ray's log directory on this node) that
    matches one of ``rules`` (name → regular expression), oldest first: the rule's name, the
    line's own time stamp (this node's clock, to the millisecond; Serve's and the C++
    components' formats), the regex's groups and the line. A line without a stamp (a
    traceback's) is skipped."""
    compiled = {name: re.compile(rule) for name, rule in rules.items()}
    found: list[dict[str, Any]] = []
    for path in sorted(glob.glob(f"{RAY_LOGS}/{files}")):
        with open(path, errors="replace") as log:
            for line in log:
                stamp = _SERVE_STAMP.match(line) or _CPP_STAMP.match(line)
                if stamp is None:
                    continue
                for name, rule in compiled.items():
                    hit = rule.search(line)
                    if hit:
                        when = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                        found.append(
                            {
                                "rule": name,
                                "t": round(when, 3),
                                "groups": list(hit.groups()),
                                "line": line.strip()[:400],
                                "file": os.path.basename(path),
                            }
                        )
                        break
    found.sort(key=lambda row: row["t"])
    return found[:limit]


def shutdown() -> dict[str, Any]:
    """Delete every application and Serve's own actors (the replicas' CPUs come back)."""
    connect()
    t0 = time.time()
    serve.shutdown()
    return {"shutdown_s": round(time.time() - t0, 2)}


def status() -> dict[str, Any]:
    """``serve.status()`` as data: per application its status and message, per deployment its
    status, trigger, message and replica counts."""
    connect()
    return _status()


def _status() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, app in serve.status().applications.items():
        deployments = {}
        for dep_name, dep in app.deployments.items():
            deployments[dep_name] = {
                "status": str(getattr(dep.status, "value", dep.status)),
                "status_trigger": str(getattr(dep.status_trigger, "value", dep.status_trigger)),
                "message": dep.message,
                "replica_states": {
                    str(getattr(k, "value", k)): v for k, v in (dep.replica_states or {}).items()
                },
            }
        out[name] = {
            "status": str(getattr(app.status, "value", app.status)),
            "message": app.message,
            "deployments": deployments,
        }
    return out


# -- the HTTP client --------------------------------------------------------------------------


class Target:
    """One proxy under load: what each request to it came back with."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.lock = threading.Lock()
        self.ok_at: list[float] = []
        self.answered_by: dict[str, int] = {}
        self.versions: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self.codes: dict[str, int] = {}
        self.latency_max = 0.0
        self.second_ok = 0
        self.second_failed = 0

    def one(self, timeout_s: float) -> bool:
        sent = time.time()
        code: int | None
        try:
            with urllib.request.urlopen(self.url, timeout=timeout_s) as reply:
                code, body = reply.status, reply.read(4096)
            error = None
        except urllib.error.HTTPError as exc:
            code, body, error = exc.code, b"", f"HTTP {exc.code}"
        except Exception as exc:  # noqa: BLE001 - a failed request is the measurement
            code, body, error = None, b"", type(exc).__name__ + ": " + str(exc)[:120]
        done = time.time()
        with self.lock:
            self.codes[str(code)] = self.codes.get(str(code), 0) + 1
            if error is None and code == 200:
                self.ok_at.append(round(done, 3))
                self.second_ok += 1
                self.latency_max = max(self.latency_max, done - sent)
                try:
                    reply_data = json.loads(body)
                    actor = str(reply_data.get("actor_id"))
                    version = str(reply_data.get("version"))
                except ValueError:
                    actor, version = "?", "?"
                self.answered_by[actor] = self.answered_by.get(actor, 0) + 1
                self.versions[version] = self.versions.get(version, 0) + 1
                return True
            self.second_failed += 1
            self.failures.append(
                {"sent": round(sent, 3), "done": round(done, 3), "code": code, "error": error}
            )
            return False

    def second(self) -> tuple[int, int]:
        with self.lock:
            counts = (self.second_ok, self.second_failed)
            self.second_ok = self.second_failed = 0
        return counts

    def report(self, max_failures: int) -> dict[str, Any]:
        with self.lock:
            return {
                "url": self.url,
                "ok": len(self.ok_at),
                "failed": len(self.failures),
                "codes": dict(self.codes),
                "ok_at": list(self.ok_at),
                "failures": self.failures[:max_failures],
                "answered_by": dict(self.answered_by),
                "versions": dict(self.versions),
                "latency_max_s": round(self.latency_max, 3),
            }


def load(
    targets: list[str],
    route: str = ECHO_ROUTE,
    threads_per_target: int = 2,
    timeout_s: float = 2.0,
    pause_s: float = 0.05,
    stop_signal: str = "load_stop",
    max_s: float = 900.0,
    max_failures: int = 2000,
) -> dict[str, Any]:
    """Steady HTTP traffic to the proxies of the nodes named in ``targets`` until the host
    raises ``stop_signal``. Each thread sends one request at a time (``timeout_s`` each) and
    pauses ``pause_s`` between requests. Emits ``load_running`` once every target answered,
    then ``load_second`` every second. No Ray: the client outlives any fault in the cluster."""
    known = nodes()
    all_targets = {
        name: Target(name, f"http://{known[name]['ip']}:{PORT}{route}") for name in targets
    }
    stop = threading.Event()

    def worker(target: Target) -> None:
        while not stop.is_set():
            target.one(timeout_s)
            stop.wait(pause_s)  # the client's pace, not a wait for the cluster

    threads = [
        threading.Thread(target=worker, args=(t,), daemon=True, name=f"load-{t.name}-{i}")
        for t in all_targets.values()
        for i in range(threads_per_target)
    ]
    started = time.time()
    for thread in threads:
        thread.start()

    def ticker() -> None:
        running = False
        while not stop.wait(1.0):  # one report a second
            counts = {name: t.second() for name, t in all_targets.items()}
            if not running and all(t.ok_at for t in all_targets.values()):
                running = True
                emit("load_running", targets={n: t.url for n, t in all_targets.items()})
            emit(
                "load_second",
                ok={n: c[0] for n, c in counts.items()},
                failed={n: c[1] for n, c in counts.items()},
            )

    tick = threading.Thread(target=ticker, daemon=True, name="load-ticker")
    tick.start()
    # The host never stopping us ends the load at ``max_s``: reported as stopped_by_host.
    with contextlib.suppress(TimeoutError):
        wait_signal(stop_signal, max_s)
    stopped = time.time()
    stop.set()
    for thread in threads:
        thread.join(timeout_s + 5)
    tick.join(5)
    return {
        "started": round(started, 3),
        "stopped": round(stopped, 3),
        "stopped_by_host": stopped - started < max_s,
        "threads_per_target": threads_per_target,
        "timeout_s": timeout_s,
        "pause_s": pause_s,
        "targets": {name: t.report(max_failures) for name, t in all_targets.items()},
    }


# -- SERVE-02: a failing check_health ---------------------------------------------------------


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
            return {"error": _describe(exc), "t": time.time()}

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


# -- SERVE-07: deployments that cannot start --------------------------------------------------


def _watch(app: str, done: Any, timeout: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll ``serve.status()`` for ``app`` until ``done(row)`` or ``timeout``; return the last
    row and every change seen (with its time)."""
    changes: list[dict[str, Any]] = []

    def fetch() -> dict[str, Any]:
        row: dict[str, Any] = _status().get(app, {})
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
            outcome["raised"] = _describe(exc)
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
    _start_serve()
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


# -- SERVE-06: an update while the GCS is down ------------------------------------------------


def _versions(proxies: list[str], route: str, tries: int) -> dict[str, Any]:
    """``tries`` requests to ``route`` through each proxy in ``proxies``: which versions
    answered, how many failed (code or error)."""
    seen: dict[str, Any] = {"versions": {}, "failed": [], "t0": round(time.time(), 3)}
    for name in proxies:
        url = f"http://{node_ip(name)}:{PORT}{route}"
        for _ in range(tries):
            code, body = _http(url, 10.0)
            version = None
            if code == 200:
                with contextlib.suppress(ValueError):
                    version = str(json.loads(body).get("version"))
            if version is None:
                seen["failed"].append({"proxy": name, "code": code, "body": body[:200]})
            else:
                seen["versions"][version] = seen["versions"].get(version, 0) + 1
    seen["t1"] = round(time.time(), 3)
    return seen


def update_during_outage(
    other: dict[str, Any],
    version: str,
    update_s: float,
    proxies: list[str],
    after_s: float = 120.0,
    signal_timeout: float = 300.0,
) -> dict[str, Any]:
    """Deploy a second application, ``other`` (``Echo`` with the arguments ``other``), while
    the GCS is up, and stay connected (a new ``ray.init`` needs the GCS). On signal
    ``gcs_down`` deploy it again with ``user_config`` ``{"version": version}`` in a thread;
    after ``update_s``, while the GCS is still down, report whether the call returned, raised
    or is still waiting and which versions ``/other`` answers through ``proxies``
    (``update_tried``). On ``gcs_back``, give the call up to ``after_s`` to end, then report
    how it ended (wall-clock times), which version answers and ``other``'s status."""
    connect()
    t0 = time.time()
    handle = serve.run(_echo(**other), name="other", route_prefix="/other")
    # The same call with the GCS up, for comparison with the update's.
    deploy_s = round(time.time() - t0, 2)
    emit("update_ready", answer=handle.remote(None).result(timeout_s=30), deploy_s=deploy_s)
    before = _versions(proxies, "/other", 3)
    down = wait_signal("gcs_down", signal_timeout)
    app = _echo(**other, version=version)
    outcome: dict[str, Any] = {}

    def run() -> None:
        t0 = time.time()
        outcome["called_at"] = round(t0, 3)
        try:
            serve.run(app, name="other", route_prefix="/other")
            outcome["returned_at"] = round(time.time(), 3)
            outcome["returned_after_s"] = round(time.time() - t0, 2)
        except Exception as exc:  # noqa: BLE001 - what the update did is the measurement
            outcome["raised"] = _describe(exc)
            outcome["raised_at"] = round(time.time(), 3)
            outcome["raised_after_s"] = round(time.time() - t0, 2)

    thread = threading.Thread(target=run, daemon=True, name="update")
    thread.start()
    thread.join(update_s)
    during = dict(outcome, waiting=thread.is_alive(), tried_at=round(time.time(), 3))
    # What ``/other`` answers while the GCS is still down (the host holds the outage on).
    during_versions = _versions(proxies, "/other", 5)
    emit("update_tried", **during, versions=during_versions)
    back = wait_signal("gcs_back", signal_timeout)
    at_back = dict(outcome, waiting=thread.is_alive())
    thread.join(after_s)
    final = dict(outcome, waiting=thread.is_alive())
    try:
        answer = serve.get_app_handle("other").remote(None).result(timeout_s=30)
    except Exception as exc:  # noqa: BLE001 - reported as data
        answer = {"error": _describe(exc)}
    return {
        "deploy_s": deploy_s,
        "down_signal": down,
        "back_signal": back,
        "versions_before": before,
        "during": during,
        "versions_during": during_versions,
        "at_back": at_back,
        "final": final,
        "answer_after": answer,
        "versions_after": _versions(proxies, "/other", 5),
        "status_after": _status().get("other"),
    }
