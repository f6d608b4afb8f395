"""Ray Serve workloads (claims SERVE-01 … SERVE-07): deploying, reading and updating
applications, and Serve's own log lines. The client is ``workloads.serve_load``; health checks
and deployments that cannot start, ``workloads.serve_health``.

Two kinds of process run on the node hosting the drivers (the driver node, or the head):

- ``load`` (``workloads.serve_load``) is the client: plain HTTP, no Ray at all.
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
from raychaos_agent import emit, node_ip, until, wait_signal

from workloads.tasks import RAY_LOGS

#: Every proxy listens here (``http_options``); the suite publishes no port.
PORT = 8000
ECHO_APP = "echo"
ECHO_ROUTE = "/echo"


def connect() -> None:
    ray.init(namespace="raychaos-serve", log_to_driver=False)


def describe(exc: BaseException) -> dict[str, Any]:
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


def start_serve() -> None:
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
    start_serve()
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


#: The controller's verdict (``deployment_state.py``, ``ActorReplicaWrapper.check_health``):
#: "Replica <id> failed the health check <n> times in a row, marking it unhealthy."
_VERDICT = re.compile(r"failed the health check (\d+) times in a row, marking it unhealthy")
#: ``ActorReplicaWrapper._check_active_health_check`` (deployment_state.py), once per check
#: that did not answer within health_check_timeout_s (counted as a failed check).
_NO_RESPONSE = re.compile(r"Didn't receive health check response for replica .* after ([\d.]+)s")
_SERVE_STAMP = re.compile(r"^\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def unhealthy_verdicts(replica_id: str) -> list[dict[str, Any]]:
    """The controller's "marking it unhealthy" lines for ``replica_id``, read from its logs on
    this node (the head): when (its local clock, ms) and after how many failures in a row."""
    return [
        {"t": t, "in_a_row": int(found[1]), "line": line}
        for t, found, line in _controller_lines(_VERDICT, replica_id)
    ]


def timed_out_checks(replica_id: str) -> list[dict[str, Any]]:
    """The controller's lines for each health check of ``replica_id`` that did not answer in
    time (SERVE-08): when, and the timeout the line names."""
    return [
        {"t": t, "after_s": float(found[1]), "line": line}
        for t, found, line in _controller_lines(_NO_RESPONSE, replica_id)
    ]


def _controller_lines(rule: re.Pattern[str], replica_id: str) -> list[tuple[float, Any, str]]:
    found: list[tuple[float, Any, str]] = []
    for path in sorted(glob.glob(f"{RAY_LOGS}/serve/controller_*.log")):
        with open(path, errors="replace") as log:
            for line in log:
                match = rule.search(line)
                stamp = _SERVE_STAMP.match(line)
                if match and stamp and replica_id in line:
                    when = datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    found.append((when, match, line.strip()))
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
    return read_status()


def read_status() -> dict[str, Any]:
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


# -- SERVE-02: a failing check_health ---------------------------------------------------------


# -- SERVE-07: deployments that cannot start --------------------------------------------------


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
            outcome["raised"] = describe(exc)
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
        answer = {"error": describe(exc)}
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
        "status_after": read_status().get("other"),
    }
