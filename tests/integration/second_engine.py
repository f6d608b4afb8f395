"""A second Docker engine on this machine, for the multi-engine tests: start it, stop it, and
leave nothing behind.

Its own ``dockerd`` with its own socket, ``--data-root``, ``--exec-root``, ``--pidfile``, its
own managed containerd (under its exec root), its own daemon.json (the machine's
``/etc/docker/daemon.json`` would clash with the flags) and its own key file, so that it has an
ID of its own (20.10 derives the ID from ``/etc/docker/key.json``: shared, both engines would
have one ID). Networking is kept out of the first engine's way:

- ``--iptables=false``: a dockerd with iptables on removes and recreates the DOCKER chains at
  start (libnetwork's ``removeIPChains``), which would wipe the rules of the engine already
  running here. raychaos's networks are ``internal`` and the host has no address on them
  (``inhibit_ipv4``), so no route in or out is needed; the faults' iptables rules live inside
  the containers' own network namespaces.
- **One FORWARD rule of its own** (:meth:`SecondEngine.allow_bridged`): with ``br_netfilter``
  loaded (``net.bridge.bridge-nf-call-iptables=1``, which the first dockerd sets), frames
  crossing *any* bridge traverse the host's iptables FORWARD chain, whose policy the first
  dockerd sets to DROP; it accepts only its own bridges. Without a rule, containers on this
  engine's networks cannot reach each other: the head comes up alone, ``ray start`` on the
  other nodes waits for the GCS forever and the readiness probe times out. The rule lives in
  a chain named after this engine (``RAYCHAOS-<hash>``, jumped to from FORWARD) and accepts
  bridged traffic inside this engine's address pool only; stopping removes the jump and
  the chain. Docker's own chains are never touched.
- ``--bridge rce2-<hash>``: a default bridge of its own (``--bridge none`` makes dockerd
  delete the host's ``docker0``, which the main engine's builds need);
  ``--default-address-pool`` on 10.213.0.0/16, apart from the first engine's ranges.

Used by ``tests/integration/test_engines.py`` (a session fixture) and runnable by hand or from
CI::

    python tests/integration/second_engine.py start /var/tmp/raychaos-engine2   # prints the URL
    python tests/integration/second_engine.py stop /var/tmp/raychaos-engine2

Stopping: remove every container and network through the API, SIGTERM the daemon (SIGKILL
after a grace), end what it left (its containerd and shims, by PID, found by their command
lines naming its exec root), unmount what is mounted below its roots, delete the bridges it
made and its FORWARD chain, remove both roots. Only processes this engine started are ever
signalled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

#: Stays clear of Docker's default pools (172.17-31.0.0/16, 192.168.0.0/16).
POOL = "10.213.0.0/16"
ADDRESS_POOL = f"base={POOL},size=24"
START_WITHIN_S = 90.0
#: The engine's own processes: the daemon, its containerd, the containers' shims.
_PROGRAMS = ("dockerd", "containerd")
STOP_GRACE_S = 30.0


@dataclass
class SecondEngine:
    """A dockerd under ``base`` (data root, config, log) and ``exec_root`` (socket, pid file)."""

    base: Path
    #: Short: containerd's socket lives under it (unix socket paths are limited to 108 bytes).
    exec_root: Path = field(default=Path())
    storage_driver: str | None = None
    #: Seconds from spawning dockerd to its first answered ping.
    started_in: float = 0.0
    bridges: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.exec_root == Path():
            self.exec_root = Path("/run") / f"raychaos-engine-{self.digest}"

    @property
    def digest(self) -> str:
        """Names this engine's host objects apart from another second engine's."""
        return hashlib.sha256(str(self.base).encode()).hexdigest()[:10]

    @property
    def bridge(self) -> str:
        """Its default bridge (an interface name: at most 15 characters)."""
        return f"rce2-{self.digest[:8]}"

    @property
    def bridge_cidr(self) -> str:
        """The default bridge's address: a /24 of 10.214.0.0/16 picked by the digest."""
        return f"10.214.{int(self.digest, 16) % 254 + 1}.1/24"

    @property
    def chain(self) -> str:
        """Its iptables chain (names are at most 28 characters)."""
        return f"RAYCHAOS-{self.digest}"

    @property
    def socket(self) -> Path:
        return self.exec_root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def data_root(self) -> Path:
        return self.base / "data"

    @property
    def pidfile(self) -> Path:
        return self.exec_root / "docker.pid"

    @property
    def log(self) -> Path:
        return self.base / "dockerd.log"

    @property
    def state_file(self) -> Path:
        return self.base / "engine.json"

    def argv(self) -> list[str]:
        return [
            shutil.which("dockerd") or "dockerd",
            "--host",
            self.url,
            "--data-root",
            str(self.data_root),
            "--exec-root",
            str(self.exec_root),
            "--pidfile",
            str(self.pidfile),
            "--config-file",
            str(self.base / "daemon.json"),
            # A default bridge of its own: `--bridge none` makes dockerd delete the host's
            # docker0 at start (daemon_unix.go removeDefaultBridgeInterface), breaking the
            # main engine's default network (so does a restart on a stored network: start()).
            "--bridge",
            self.bridge,
            "--iptables=false",
            "--ip-masq=false",
            "--default-address-pool",
            ADDRESS_POOL,
            "--userland-proxy=false",
            "--log-level",
            "warn",
        ]

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> SecondEngine:
        self.base.mkdir(parents=True, exist_ok=True)
        self.exec_root.mkdir(parents=True, exist_ok=True)
        config: dict[str, object] = {
            # The key the engine's ID derives from (Docker 20.10): its own, not /etc/docker's.
            "deprecated-key-path": str(self.base / "key.json"),
            "log-driver": "json-file",
            "log-opts": {"max-size": "10m", "max-file": "2"},
        }
        if self.storage_driver:
            config["storage-driver"] = self.storage_driver
        (self.base / "daemon.json").write_text(json.dumps(config))
        # A restart must find no stored network: dockerd 20.10, finding its persisted default
        # "bridge" network with an address pool set and live-restore off, deletes it and then
        # the link named docker0, hard-coded: the host's, the main engine's (daemon_unix.go,
        # removeDefaultBridgeInterface). halt() noted the old networks' bridges; stop()
        # deletes them.
        shutil.rmtree(self.data_root / "network", ignore_errors=True)
        host_bridge = Path("/sys/class/net/docker0").exists()
        _own_bridge(self.bridge, self.bridge_cidr)
        self.bridges.add(self.bridge)
        self.allow_bridged()
        started = time.monotonic()
        with self.log.open("ab") as log:
            proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # A restart (after :meth:`halt`) keeps the bridges noted before.
        self.bridges |= set(self._state().get("bridges") or [])
        self.state_file.write_text(
            json.dumps(
                {"pid": proc.pid, "exec_root": str(self.exec_root), "bridges": sorted(self.bridges)}
            )
        )
        deadline = started + START_WITHIN_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"dockerd exited {proc.returncode}: {self._log_tail()}")
            with contextlib.suppress(docker.errors.DockerException, OSError):
                client = docker.DockerClient(base_url=self.url, timeout=5)
                try:
                    client.ping()
                    break
                finally:
                    client.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not answer in {START_WITHIN_S:.0f} s")
            time.sleep(0.2)
        self.started_in = time.monotonic() - started
        if host_bridge and not Path("/sys/class/net/docker0").exists():
            raise RuntimeError("starting the second dockerd deleted the host's docker0")
        return self

    def client(self, timeout: int = 120) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, timeout=timeout)

    # -- stop ----------------------------------------------------------------------------------
    def halt(self) -> None:
        """Stop the daemon (SIGTERM) and leave its objects in place, as an engine that goes down
        mid-run does; :meth:`stop` still cleans up after it."""
        self._remember_bridges()
        pid = int(self._state().get("pid") or 0)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            if not _wait_gone(pid, STOP_GRACE_S):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 10)

    def _remember_bridges(self) -> None:
        """Note the bridges of the engine's networks (the host keeps them after the daemon)."""
        try:
            client = self.client(timeout=30)
            try:
                self.bridges |= {
                    _bridge_of(n.attrs)
                    for n in client.networks.list()
                    if n.attrs.get("Driver") == "bridge"
                }
            finally:
                client.close()
        except (docker.errors.DockerException, OSError):
            return
        state = self._state()
        state["bridges"] = sorted(self.bridges)
        self.state_file.write_text(json.dumps(state))

    def stop(self) -> list[str]:
        """Stop the engine and remove everything it made; what could not be removed, if any."""
        problems: list[str] = []
        state = self._state()
        pid = int(state.get("pid") or 0)
        self.bridges |= set(state.get("bridges") or [])
        self._empty(problems)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            if not _wait_gone(pid, STOP_GRACE_S):
                problems.append(f"dockerd {pid} ignored SIGTERM for {STOP_GRACE_S:.0f} s: killed")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 10)
        for leftover in self._processes():
            problems.append(f"killed leftover process {leftover}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
            _wait_gone(leftover, 10)
        for point in self._mounts():
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=60)
        for bridge in sorted(self.bridges - {"docker0"}):  # the main engine's, never ours
            if Path("/sys/class/net", bridge).exists():
                subprocess.run(["ip", "link", "delete", bridge], capture_output=True, check=False)
        problems += self.disallow_bridged()
        for root in (self.exec_root, self.base):
            shutil.rmtree(root, ignore_errors=True)
            if root.exists():
                problems.append(f"could not remove {root}")
        return problems

    def leftovers(self) -> list[str]:
        """What of this engine is still on the machine (empty after a clean stop)."""
        found = [f"process {pid}" for pid in self._processes()]
        found += [f"mount {point}" for point in self._mounts()]
        found += [f"bridge {b}" for b in sorted(self.bridges) if Path("/sys/class/net", b).exists()]
        found += [f"directory {root}" for root in (self.base, self.exec_root) if root.exists()]
        if _iptables("-n", "-L", self.chain).returncode == 0:
            found.append(f"iptables chain {self.chain}")
        return found

    # -- the host's FORWARD chain ----------------------------------------------------------------
    def allow_bridged(self) -> None:
        """Let this engine's containers reach each other across their network's bridge.

        ``br_netfilter`` sends bridged frames through the host's FORWARD chain, whose policy
        the first dockerd sets to DROP (it accepts only its own bridges). One rule in a chain
        of this engine's own: bridged (``physdev``) traffic with both ends in its address pool.
        Bridged traffic never leaves its bridge, so clusters stay apart from each other and
        from the host (which has no address on their networks).
        """
        if _iptables("-n", "-L", self.chain).returncode != 0:
            _iptables("-N", self.chain, check=True)
        _iptables("-F", self.chain, check=True)
        rule = ["-s", POOL, "-d", POOL, "-m", "physdev", "--physdev-is-bridged", "-j", "ACCEPT"]
        _iptables("-A", self.chain, *rule, check=True)
        if _iptables("-C", "FORWARD", "-j", self.chain).returncode != 0:
            # First: ahead of the first engine's DOCKER-USER and isolation jumps.
            _iptables("-I", "FORWARD", "1", "-j", self.chain, check=True)

    def disallow_bridged(self) -> list[str]:
        """Remove the jump and the chain :meth:`allow_bridged` made (what failed, if any)."""
        if _iptables("-n", "-L", self.chain).returncode != 0:
            return []
        while _iptables("-C", "FORWARD", "-j", self.chain).returncode == 0:
            if _iptables("-D", "FORWARD", "-j", self.chain).returncode != 0:
                break
        _iptables("-F", self.chain)
        removed = _iptables("-X", self.chain)
        return [] if removed.returncode == 0 else [f"iptables chain {self.chain}: {removed.stderr}"]

    def _empty(self, problems: list[str]) -> None:
        """Remove every container and network while the engine answers (and note the bridges
        its networks have, to delete any the daemon leaves)."""
        try:
            client = self.client(timeout=30)
            client.ping()
        except (docker.errors.DockerException, OSError):
            return
        try:
            for container in client.containers.list(all=True):
                try:
                    container.remove(force=True, v=True)
                except docker.errors.DockerException as exc:
                    problems.append(f"container {container.name}: {exc}")
            for network in client.networks.list():
                if network.attrs.get("Driver") != "bridge" or network.name == "bridge":
                    continue  # none, host, the default bridge: the daemon's own
                self.bridges.add(_bridge_of(network.attrs))
                try:
                    network.remove()
                except docker.errors.DockerException as exc:
                    problems.append(f"network {network.name}: {exc}")
            client.volumes.prune()
        finally:
            client.close()

    def _state(self) -> dict[str, Any]:
        try:
            found: dict[str, Any] = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            found = {}
        if not found.get("pid") and self.pidfile.exists():
            with contextlib.suppress(OSError, ValueError):
                found["pid"] = int(self.pidfile.read_text().strip())
        return found

    def _processes(self) -> list[int]:
        """dockerd, containerd and the shims of this engine: their command lines name its exec
        root (containerd's socket and config are under it). Nothing else is ever matched (a
        raychaos reaper naming the engine's URL is left to end by itself)."""
        marker = str(self.exec_root).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            program = Path(argv.split(b"\0", 1)[0].decode(errors="replace")).name
            if marker in argv and program.startswith(_PROGRAMS):
                found.append(int(entry.name))
        return found

    def _mounts(self) -> list[str]:
        prefixes = [str(self.base.resolve()), str(self.exec_root)]
        points = []
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/mounts").read_text().splitlines():
                fields = line.split()
                if len(fields) > 1:
                    point = fields[1].replace("\\040", " ")
                    if any(point == p or point.startswith(p + "/") for p in prefixes):
                        points.append(point)
        return sorted(points, key=len, reverse=True)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-5:])
        return "(no log)"


def _own_bridge(name: str, cidr: str) -> None:
    """Create the second engine's default bridge (dockerd needs a named bridge to exist)."""
    if not Path("/sys/class/net", name).exists():
        subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", cidr, "dev", name], check=True)
    subprocess.run(["ip", "link", "set", name, "up"], check=True)


def _iptables(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """The host's filter table; ``-w``: wait for the xtables lock dockerd also takes."""
    done = subprocess.run(
        ["iptables", "-w", "10", *args], capture_output=True, text=True, check=False, timeout=60
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"iptables {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def _bridge_of(attrs: dict[str, object]) -> str:
    options = attrs.get("Options") or {}
    name = options.get("com.docker.network.bridge.name") if isinstance(options, dict) else None
    return str(name or f"br-{str(attrs.get('Id', ''))[:12]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return False


def _wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our child: reap it
        time.sleep(0.1)
    return True


def system_storage_driver() -> str | None:
    """The first engine's storage driver (fuse-overlayfs here), so the second works alike."""
    try:
        client = docker.from_env(timeout=10)
        try:
            return str(client.info().get("Driver") or "") or None
        finally:
            client.close()
    except (docker.errors.DockerException, OSError):
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(f"usage: {sys.argv[0]} start|stop BASE_DIR", file=sys.stderr)
        return 2
    engine = SecondEngine(Path(argv[1]).resolve())
    if argv[0] == "start":
        engine.storage_driver = system_storage_driver()
        engine.start()
        print(engine.url)
        print(f"started in {engine.started_in:.1f} s", file=sys.stderr)
        return 0
    problems = engine.stop()
    for problem in problems:
        print(problem, file=sys.stderr)
    left = engine.leftovers()
    for item in left:
        print(f"left behind: {item}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
