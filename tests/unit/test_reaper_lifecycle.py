"""The reaper as a process, against a fake engine on a Unix socket (no Docker needed).

An owner process starts its reaper exactly as the ``docker_client`` fixture does; the test
then kills the owner (or lets it end) and watches what the reaper asks of the engine named
by DOCKER_HOST. Real clusters and real signals to pytest: tests/integration/test_crash_matrix.py.
"""

from __future__ import annotations

import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos import labels

API = "1.43"
OWNER_SCRIPT = """
import json, sys, time
from chaos import labels
from chaos.backends.docker import reaper
proc = reaper.start("r-test")
again = reaper.start("r-test")
print(json.dumps({
    "reaper": proc.pid if proc else None,
    "once": again is proc,
    "owner": labels.owner_labels(),
}), flush=True)
if sys.argv[1] == "linger":
    time.sleep(120)
"""


class Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Just enough of the Engine API for docker-py's list and delete calls."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, Handler)
        self.lock = threading.Lock()
        #: kind → name → labels
        self.objects: dict[str, dict[str, dict[str, str]]] = {
            "containers": {},
            "networks": {},
            "volumes": {},
        }
        self.deleted: list[str] = []
        self.requests: list[str] = []

    def add(self, kind: str, name: str, obj_labels: dict[str, str]) -> None:
        with self.lock:
            self.objects[kind][name] = obj_labels

    def listed(self, kind: str, query: dict[str, list[str]]) -> list[tuple[str, dict[str, str]]]:
        wanted = json.loads(query.get("filters", ["{}"])[0]).get("label", [])
        if isinstance(wanted, dict):  # docker-py may send {"k=v": true}
            wanted = list(wanted)
        with self.lock:
            return [
                (name, found)
                for name, found in self.objects[kind].items()
                if all(_matches(found, w) for w in wanted)
            ]


def _matches(found: dict[str, str], wanted: str) -> bool:
    key, _, value = wanted.partition("=")
    return key in found and (not value or found[key] == value)


class Handler(BaseHTTPRequestHandler):
    server: Engine

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[list[str], dict[str, list[str]]]:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        if parts and parts[0].startswith("v1."):
            parts = parts[1:]
        return parts, parse_qs(url.query)

    def do_GET(self) -> None:
        parts, query = self._route()
        self.server.requests.append(f"GET {'/'.join(parts)}")
        engine = self.server
        if parts == ["version"]:
            return self._send(200, {"ApiVersion": API, "Version": "fake"})
        if parts == ["_ping"]:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"OK")
            return None
        if parts == ["containers", "json"]:
            return self._send(200, [{"Id": n} for n, _ in engine.listed("containers", query)])
        if len(parts) == 3 and parts[0] == "containers" and parts[2] == "json":
            with engine.lock:
                found = engine.objects["containers"].get(parts[1])
            if found is None:
                return self._send(404, {"message": f"No such container: {parts[1]}"})
            return self._send(
                200, {"Id": parts[1], "Name": "/" + parts[1], "Config": {"Labels": found}}
            )
        if parts == ["networks"]:
            listed = engine.listed("networks", query)
            return self._send(200, [{"Id": n, "Name": n, "Labels": found} for n, found in listed])
        if parts == ["volumes"]:
            listed = engine.listed("volumes", query)
            return self._send(
                200, {"Volumes": [{"Name": n, "Labels": found} for n, found in listed]}
            )
        return self._send(404, {"message": f"not faked: {self.path}"})

    def do_DELETE(self) -> None:
        parts, _ = self._route()
        kind = parts[0]
        with self.server.lock:
            gone = self.server.objects.get(kind, {}).pop(parts[1], None)
            if gone is not None:
                self.server.deleted.append(f"{kind[:-1]} {parts[1]}")
        self._send(204 if gone is not None else 404, None if gone else {"message": "No such"})


@pytest.fixture
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    # A short path: Unix socket paths are limited to ~107 bytes.
    sock = tmp_path_factory.mktemp("eng") / "d.sock"
    server = Engine(str(sock))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def owner_env(engine: Engine, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    return {
        **env,
        "DOCKER_HOST": f"unix://{engine.server_address}",
        "RAYCHAOS_CACHE_DIR": str(tmp_path),
    }


def start_owner(env: dict[str, str], mode: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, mode], env=env, text=True, stdout=subprocess.PIPE
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, f"the owner printed nothing (exit {owner.wait(30)})"
    said: dict[str, Any] = json.loads(line)
    assert said["reaper"] and said["once"], said
    return owner, said


def open_files(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue  # closed in between (the reaper reads the owner's /proc entry)
    return found


def wait_exited(pid: int, start: str, within: float = 60) -> None:
    for attempt in Retrying(stop=stop_after_delay(within), wait=wait_fixed(0.2), reraise=True):
        with attempt:
            assert labels.process_state(pid, start) == "dead", f"reaper {pid} still runs"


def test_a_killed_owners_objects_go_and_nothing_else(
    engine: Engine, owner_env: dict[str, str], tmp_path: Path
) -> None:
    owner, said = start_owner(owner_env, "linger")
    reaper_pid = said["reaper"]
    reaper_start = labels.process_start_ticks(reaper_pid)
    mine = {labels.RUN: "r-test", labels.CLUSTER: "k1", **said["owner"]}
    try:
        # Detached from the owner: its own session, stdin /dev/null, output to its log only.
        assert os.getsid(reaper_pid) == reaper_pid
        assert os.readlink(f"/proc/{reaper_pid}/fd/0") == os.devnull
        log = tmp_path / "reaper" / f"{mine[labels.OWNER_PID]}-{mine[labels.OWNER_START]}.log"
        assert os.readlink(f"/proc/{reaper_pid}/fd/1") == str(log)
        for attempt in Retrying(stop=stop_after_delay(60), wait=wait_fixed(0.2), reraise=True):
            with attempt:  # started up (imports done)
                assert log.is_file() and "watching pid" in log.read_text()
        owner_pipe = os.readlink(f"/proc/{owner.pid}/fd/1")
        assert owner_pipe not in open_files(reaper_pid), "it must not hold the owner's output"

        engine.add("containers", "head", mine)
        engine.add("containers", "worker", mine)
        engine.add("networks", "net", mine)
        engine.add("volumes", "vol", mine)
        (tmp_path / "kept").mkdir()
        (tmp_path / "kept" / "k-kept").touch()
        engine.add("containers", "kept-head", {**mine, labels.CLUSTER: "k-kept"})
        engine.add("containers", "stranger", {**mine, labels.OWNER_START: "1"})
        engine.add("containers", "earlier-boot", {**mine, labels.OWNER_BOOT: "another-boot"})
        assert engine.deleted == [], "nothing goes while the owner lives"
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    wait_exited(reaper_pid, reaper_start)
    assert sorted(engine.deleted[:2]) == ["container head", "container worker"]
    assert engine.deleted[2:] == ["network net", "volume vol"]
    assert set(engine.objects["containers"]) == {"kept-head", "stranger", "earlier-boot"}
    text = log.read_text()
    assert "removed container head" in text and "kept for inspection" in text, text


def test_after_a_normal_end_the_reaper_finds_nothing_and_leaves_no_log(
    engine: Engine, owner_env: dict[str, str], tmp_path: Path
) -> None:
    owner, said = start_owner(owner_env, "exit")
    reaper_start = labels.process_start_ticks(said["reaper"])
    assert owner.wait(30) == 0, "the owner exits without waiting for its reaper"
    wait_exited(said["reaper"], reaper_start)
    assert engine.deleted == []
    assert any(r.startswith("GET containers/json") for r in engine.requests), engine.requests
    assert list((tmp_path / "reaper").glob("*.log")) == []
