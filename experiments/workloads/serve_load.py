"""Ray Serve's client under test (SERVE-01 … SERVE-07): ``load``, plain HTTP (``urllib``)
against chosen proxies, no Ray at all, so it keeps counting whatever happens to the cluster (a
GCS outage included). It reports every request's outcome: successes as completion times and
the replica actor that answered, failures with their send and end times and the error, and one
``load_second`` event a second (per target: answered, failed).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from raychaos_agent import emit, nodes, wait_signal

from workloads.serve import ECHO_ROUTE, PORT


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
