"""The posture of a real cluster (docs/posture.md): what each container may do, what the host
can reach, where the Redis password is, and that Ray and the faults still work under it.

The host-side checks (addresses, routes, TCP, `ps`) need the engine on this machine; with a
remote DOCKER_HOST they are skipped, the container-side ones still run.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator

import pytest
from tenacity import Retrying, stop_after_attempt, wait_fixed

from chaos.backends.docker.backend import DockerBackend
from chaos.cluster.cluster import Cluster
from chaos.spec.plan import DASHBOARD_PORT, GCS_PORT, REDIS_PORT

#: Bit of CAP_NET_ADMIN in /proc/<pid>/status CapEff.
CAP_NET_ADMIN = 1 << 12
#: Ray processes that Ray 2.60 itself starts with the Redis password on their argv:
#: gcs_server (--redis_password=, services.py start_gcs_server), the raylet (inside
#: --python_worker_command=… --redis-password=) and the head's Python workers (default_worker.py
#: --redis-password=, and their ray::IDLE / ray::<task> titles keep the original argv tail).
RAY_OWN_CARRIERS = ("/gcs_server ", "/raylet ", "default_worker.py", "ray::")

#: Host-side checks need the engine's containers on this machine.
LOCAL_ENGINE = os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")
local_engine = pytest.mark.skipif(not LOCAL_ENGINE, reason="the Docker engine is remote")


def backend_of(cluster: Cluster) -> DockerBackend:
    backend = cluster.backend
    assert isinstance(backend, DockerBackend)
    return backend


def read(cluster: Cluster, node: str, script: str, expect: str = "") -> str:
    """``sh -c script`` in ``node``: exit 0 and ``expect`` in its output, else read again.

    Reading /proc or the cgroup is idempotent; under CI load an exec's output stream has
    ended before the process wrote (exit 0, output "": chaos.backends.docker.backend), so an
    empty read is retried, not believed.
    """
    for attempt in Retrying(stop=stop_after_attempt(3), wait=wait_fixed(1), reraise=True):
        with attempt:
            out = cluster.exec(node, ["sh", "-c", script], timeout=15)
            assert out.exit_code == 0 and out.output.strip() and expect in out.output, (
                f"{script!r} in {node}: exit {out.exit_code}, said {out.output[-300:]!r}"
            )
    return out.output


def status_field(cluster: Cluster, node: str, field: str) -> str:
    out = read(cluster, node, f"grep '^{field}:' /proc/1/status", expect=f"{field}:")
    return out.split(":", 1)[1].strip()


def pids_max(cluster: Cluster, node: str) -> str:
    script = "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
    return read(cluster, node, script).strip()


def pids_current(cluster: Cluster, node: str) -> str:
    script = "cat /sys/fs/cgroup/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids/pids.current"
    return read(cluster, node, script).strip()


def host_ipv4_addresses() -> Iterator[tuple[str, ipaddress.IPv4Interface]]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        fields = line.split()
        yield fields[1], ipaddress.IPv4Interface(fields[3])


#: Sent to a port from the host and from inside the cluster; the answers are compared.
PROBE_REQUEST = "GET /api/version HTTP/1.0\r\n\r\n"
_PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)\n"
    "    c.settimeout(3)\n"
    "    c.sendall(sys.argv[3].encode())\n"
    "    print(c.recv(4096).hex())\n"
    "except OSError:\n"
    "    print('none')\n"
)


def answer_from_host(ip: str, port: int) -> str:
    """Hex of what the host gets back for PROBE_REQUEST at ``ip:port`` ('none': nothing).

    A connect alone proves nothing: an egress proxy on the host's default route may accept any
    TCP connection. Only the answer the cluster itself gives would show the host reached it."""
    out = subprocess.run(
        ["python3", "-c", _PROBE, ip, str(port), PROBE_REQUEST],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


def answer_from_inside(cluster: Cluster, ip: str, port: int) -> str:
    out = cluster.exec("driver", ["python3", "-c", _PROBE, ip, str(port), PROBE_REQUEST])
    return out.output.strip()


def check_container_posture(cluster: Cluster) -> dict[str, str]:
    """Every host as its plan declares: capabilities, PID limit, no-new-privileges, user.
    Returns each node's current task count (for the record)."""
    backend = backend_of(cluster)
    counts = {}
    for name, node in cluster.nodes.items():
        plan = node.plan
        container = backend.containers[name]
        container.reload()
        host = container.attrs["HostConfig"]
        assert [c.removeprefix("CAP_") for c in host["CapDrop"]] == ["ALL"], name
        added = sorted(c.removeprefix("CAP_") for c in host["CapAdd"] or [])
        assert added == sorted(plan.capabilities), name
        assert host["PidsLimit"] == plan.pids_limit, name
        assert "no-new-privileges" in (host["SecurityOpt"] or []), name
        assert host["Privileged"] is False, name
        assert (container.attrs["Config"]["User"] or None) == plan.user, name
        # The kernel's view inside the host agrees with the engine's.
        effective = int(status_field(cluster, name, "CapEff"), 16)
        want = CAP_NET_ADMIN if "NET_ADMIN" in plan.capabilities else 0
        if plan.user not in (None, "root"):
            want = 0  # a non-root user's processes hold no capability at all
        assert effective == want, f"{name}: CapEff {effective:#x}, expected {want:#x}"
        assert status_field(cluster, name, "NoNewPrivs") == "1", name
        assert pids_max(cluster, name) == str(plan.pids_limit), name
        counts[name] = pids_current(cluster, name)
    return counts


def check_network_posture(cluster: Cluster) -> None:
    backend = backend_of(cluster)
    assert backend.network is not None
    backend.network.reload()
    attrs = backend.network.attrs
    assert attrs["Internal"] is True
    assert attrs["Options"].get("com.docker.network.bridge.inhibit_ipv4") == "true"
    subnet = ipaddress.IPv4Network(attrs["IPAM"]["Config"][0]["Subnet"])
    assert subnet == cluster.plan.subnet, "fixed addresses: the plan's subnet is the network's"
    for node in cluster.nodes.values():  # every node kept its planned address
        container = backend.containers[node.name]
        got = container.attrs["NetworkSettings"]["Networks"][backend.network.name]["IPAddress"]
        assert got == node.plan.ip, node.name


def check_host_cannot_reach(cluster: Cluster) -> None:
    if not LOCAL_ENGINE:
        return
    backend = backend_of(cluster)
    assert backend.network is not None
    bridge = "br-" + str(backend.network.id)[:12]
    subnet = cluster.plan.subnet
    mine = [f"{dev} {iface}" for dev, iface in host_ipv4_addresses() if iface.ip in subnet]
    assert not mine, f"the host has an address in the cluster's subnet {subnet}: {mine}"
    bridge_v4 = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True
    ).stdout
    assert not bridge_v4.strip(), f"the bridge has an IPv4 address: {bridge_v4}"
    head_ip = cluster.plan.head_ip
    route = subprocess.run(["ip", "route", "get", head_ip], capture_output=True, text=True)
    assert f"dev {bridge} " not in route.stdout + " ", f"host routes into the bridge: {route}"
    # Positive control: inside the cluster the dashboard answers with Ray's version.
    inside = cluster.exec(
        "driver",
        [
            "python3",
            "-c",
            "import urllib.request;print(urllib.request.urlopen("
            f"'http://{head_ip}:{DASHBOARD_PORT}/api/version',timeout=10).read().decode())",
        ],
        timeout=30,
    )
    assert inside.ok and "ray_version" in inside.output, inside.output
    # From the host, nothing of Ray answers: not the dashboard, not the GCS.
    for port in (DASHBOARD_PORT, GCS_PORT):
        theirs = answer_from_inside(cluster, head_ip, port)
        ours = answer_from_host(head_ip, port)
        assert b"ray_version".hex() not in ours, f"host reached {head_ip}:{port}"
        assert ours in ("none", "") or ours != theirs, f"host reached {head_ip}:{port}: {ours}"


def check_faults_still_work(cluster: Cluster) -> None:
    """What the nemesis execs (as root, with only NET_ADMIN) still does its job."""
    script = "\n".join(
        [
            "set -e",
            "iptables -N RAYCHAOS-POSTURE",
            "iptables -A RAYCHAOS-POSTURE -s 192.0.2.1 -j DROP",
            "iptables -I INPUT -j RAYCHAOS-POSTURE",
            "iptables -S | grep -q RAYCHAOS-POSTURE",
            "iptables -D INPUT -j RAYCHAOS-POSTURE",
            "iptables -F RAYCHAOS-POSTURE",
            "iptables -X RAYCHAOS-POSTURE",
            "tc qdisc show dev eth0 >/dev/null",
            "ps -eo pid=,comm= | grep -q raylet",
            "ss -ltnH | grep -q .",
            "fallocate -l 1M /tmp/posture-fill",
            "rm /tmp/posture-fill",
            "sleep 60 &",
            'kill -9 "$!"',
            "echo killed",
        ]
    )
    out = cluster.exec("worker", ["sh", "-c", script], timeout=60)
    assert out.ok and out.output.strip().endswith("killed"), out.output


@pytest.mark.cluster(workers=1)
def test_a_cluster_runs_with_least_privilege_and_ray_still_works(ray_cluster: Cluster) -> None:
    counts = check_container_posture(ray_cluster)
    print(f"tasks per node after boot: {json.dumps(counts)}")  # for the record (-s)
    check_network_posture(ray_cluster)
    check_host_cannot_reach(ray_cluster)
    check_faults_still_work(ray_cluster)
    run = ray_cluster.run(
        "workloads.basics:node_ids_of_pinned_tasks", nodes=["head", "worker"], timeout=120
    )
    placed = run.result()
    assert placed == {n: ray_cluster.node(n).node_id for n in ("head", "worker")}


def password_lines(password: str) -> list[str]:
    ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if password in line]


@pytest.mark.cluster(workers=1, gcs_ft="redis")
def test_a_redis_gcs_cluster_keeps_the_password_off_what_raychaos_writes(
    ray_cluster: Cluster,
) -> None:
    password = ray_cluster.plan.redis_password
    assert password
    check_container_posture(ray_cluster)
    check_network_posture(ray_cluster)
    check_host_cannot_reach(ray_cluster)
    backend = backend_of(ray_cluster)
    # Not in what the engine stores about any container (docker inspect).
    for name, container in backend.containers.items():
        config = container.attrs["Config"]
        seen = json.dumps([config.get("Cmd"), config.get("Entrypoint"), config.get("Env")])
        assert password not in seen, f"{name}'s container config holds the password"
    # Redis runs as its own user and refuses a client without the password.
    user = ray_cluster.exec("redis", ["ps", "-o", "user=", "-C", "redis-server"], timeout=15)
    assert user.output.split() == ["redis"], user.output
    anonymous = ray_cluster.exec("redis", ["redis-cli", "-p", str(REDIS_PORT), "ping"])
    assert "NOAUTH" in anonymous.output, anonymous.output
    authed = ray_cluster.exec(
        "redis", ["redis-cli", "-p", str(REDIS_PORT), "ping"], env={"REDISCLI_AUTH": password}
    )
    assert authed.output.strip() == "PONG", authed.output
    # Ray works on it.
    run = ray_cluster.run(
        "workloads.basics:node_ids_of_pinned_tasks", nodes=["head", "worker"], timeout=120
    )
    assert set(run.result()) == {"head", "worker"}
    if LOCAL_ENGINE:
        # On the host, only Ray's own processes carry it (the known limit, docs/posture.md):
        # never redis-server, never a command line raychaos wrote (ray start, the entry).
        lines = password_lines(password)
        strays = [line for line in lines if not any(c in line for c in RAY_OWN_CARRIERS)]
        assert not strays, f"the password is on command lines raychaos controls: {strays}"


@local_engine
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="KNOWN LIMIT (Ray 2.60): services.py start_gcs_server puts --redis_password=<pw> on "
    "gcs_server's argv (gcs_server_main.cc reads it only from that gflag) and "
    "start_raylet/default_worker carry --redis-password=<pw>; Ray has no env or file for it. "
    "A pass here means Ray stopped doing so: drop this xfail and tighten the test above.",
)
@pytest.mark.cluster(workers=1, gcs_ft="redis")
def test_the_redis_password_is_on_no_host_command_line(ray_cluster: Cluster) -> None:
    password = ray_cluster.plan.redis_password
    assert password
    assert password_lines(password) == []
