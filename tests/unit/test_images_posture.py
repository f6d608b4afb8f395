"""The posture every node image runs with (docs/posture.md), read from the plan and from what
the Docker backend asks the engine for: capabilities, PID limit, no-new-privileges, the user,
secret files instead of secret arguments, a network the host has no address on. No Docker."""

from __future__ import annotations

import dataclasses
import io
import ipaddress
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from chaos.backends.docker.backend import NETWORK_OPTIONS, DockerBackend
from chaos.labels import RunIdentity
from chaos.spec import plan as plan_module
from chaos.spec.plan import (
    HEAD_START_WITH_SECRET,
    PIDS_LIMIT,
    RAY_CAPABILITIES,
    REDIS_CONF,
    REDIS_PASSWORD_FILE,
    NodePlan,
    plan_cluster,
    redis_plan,
)
from chaos.spec.topology import ClusterSpec, NodeSpec

PASSWORD = "0123456789abcdef01234567"
SUBNET = ipaddress.IPv4Network("10.99.0.0/24")


def redis_cluster() -> Any:
    spec = ClusterSpec(workers=(NodeSpec(name="worker", count=1),), gcs_ft="redis")
    return plan_cluster(
        spec,
        subnet=SUBNET,
        image_for=lambda _: ("2.60.0", "raychaos/ray:2.60.0-py3.11"),
        base_image="raychaos/base:bookworm-x",
        redis_password=PASSWORD,
    )


def test_every_capability_kept_says_why() -> None:
    assert set(RAY_CAPABILITIES) == {"NET_ADMIN"}
    assert all(len(reason) > 20 for reason in RAY_CAPABILITIES.values())
    assert PIDS_LIMIT >= 4096  # thousands of threads: a raylet and its workers on a big host


def test_the_redis_password_is_on_no_argv_we_write_and_in_no_repr() -> None:
    plan = redis_cluster()
    for node in plan.nodes:
        assert PASSWORD not in " ".join(node.argv), node.name
        assert PASSWORD not in " ".join(f"{k}={v}" for k, v in node.env.items()), node.name
    assert PASSWORD not in repr(plan)
    head, redis = plan.node("head"), plan.node("redis")
    assert head.secret_files == {REDIS_PASSWORD_FILE: PASSWORD}
    assert head.argv[:2] == ("python3", "-c") and head.argv[3] == "start"
    assert "--head" in head.argv
    assert redis.secret_files == {REDIS_CONF: f'requirepass "{PASSWORD}"\n'}
    assert redis.argv[:2] == ("redis-server", REDIS_CONF)
    assert not plan.node("worker").secret_files


def test_redis_runs_unprivileged_and_ray_nodes_keep_only_net_admin() -> None:
    plan = redis_cluster()
    redis = plan.node("redis")
    assert redis.user == "redis" and not redis.capabilities
    assert redis.pids_limit == plan_module.REDIS_PIDS_LIMIT
    for name in ("head", "worker", "driver"):
        node = plan.node(name)
        assert node.user is None and set(node.capabilities) == {"NET_ADMIN"}
        assert node.pids_limit == PIDS_LIMIT


def test_the_head_start_runs_rays_cli_with_the_password_from_its_file(tmp_path: Path) -> None:
    # A stand-in for Ray's CLI entry point that reports the argv it was given.
    cli = tmp_path / "ray" / "scripts"
    cli.mkdir(parents=True)
    (tmp_path / "ray" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "scripts.py").write_text("import sys\ndef main():\n    print(sys.argv)\n    return 0\n")
    secret = tmp_path / "redis-password"
    secret.write_text(PASSWORD + "\n")
    code = HEAD_START_WITH_SECRET.replace(REDIS_PASSWORD_FILE, str(secret))
    proc = subprocess.run(
        [sys.executable, "-c", code, "start", "--head", "--port=6379"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=60,
        check=True,
    )
    assert proc.stdout.strip() == repr(
        ["ray", "start", "--head", "--port=6379", f"--redis-password={PASSWORD}"]
    )


# -- what the backend asks the engine for ------------------------------------------------------


class FakeContainer:
    name = "raychaos-x-redis"

    def __init__(self) -> None:
        self.archives: list[tuple[str, bytes]] = []
        self.started = False

    def put_archive(self, path: str, data: bytes) -> bool:
        self.archives.append((path, data))
        return True

    def get_archive(self, path: str) -> tuple[Any, dict[str, Any]]:
        assert path == "/etc/passwd"
        passwd = b"root:x:0:0:root:/root:/bin/bash\nredis:x:100:101::/var/lib/redis:/bin/false\n"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo("passwd")
            info.size = len(passwd)
            tar.addfile(info, io.BytesIO(passwd))
        return iter([buffer.getvalue()]), {}

    def start(self) -> None:
        self.started = True


class FakeApi:
    def __init__(self) -> None:
        self.host_config: dict[str, Any] = {}
        self.container: dict[str, Any] = {}

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        self.host_config = kwargs
        return kwargs

    def create_networking_config(self, config: Any) -> Any:
        return config

    def create_endpoint_config(self, **kwargs: Any) -> Any:
        return kwargs

    def create_container(self, image: str, **kwargs: Any) -> dict[str, str]:
        self.container = {"image": image, **kwargs}
        return {"Id": "c1"}


class FakeNetwork:
    name = "raychaos-x"

    def __init__(self) -> None:
        self.attrs = {"IPAM": {"Config": [{"Subnet": str(SUBNET)}]}}

    def remove(self) -> None:
        pass


class FakeNetworks:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, name: str, **kwargs: Any) -> FakeNetwork:
        self.created.append({"name": name, **kwargs})
        return FakeNetwork()


class FakeContainers:
    def __init__(self) -> None:
        self.one = FakeContainer()

    def get(self, _: str) -> FakeContainer:
        return self.one


class FakeClient:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.containers = FakeContainers()
        self.networks = FakeNetworks()


@pytest.fixture
def backend() -> DockerBackend:
    made = DockerBackend(
        FakeClient(),  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        identity=RunIdentity(run_id="abcd1234"),
        key="raychaos-abcd1234-main-c-x",
    )
    made.network = FakeNetwork()  # type: ignore[assignment]
    return made


def started(backend: DockerBackend, node: NodePlan) -> FakeClient:
    backend.start_node(node)
    client: FakeClient = backend.client  # type: ignore[assignment]
    assert client.containers.one.started
    return client


def test_the_network_gives_the_host_no_address(backend: DockerBackend) -> None:
    backend.network = None
    assert backend.create_network() == SUBNET
    client: FakeClient = backend.client  # type: ignore[assignment]
    assert len(client.networks.created) == 2  # the subnet probe, then the pinned network
    for created in client.networks.created:
        assert created["internal"] is True
        assert created["options"] == {"com.docker.network.bridge.inhibit_ipv4": "true"}
    assert NETWORK_OPTIONS["com.docker.network.bridge.inhibit_ipv4"] == "true"


def test_a_ray_node_drops_every_capability_but_net_admin(backend: DockerBackend) -> None:
    node = redis_cluster().node("worker")
    client = started(backend, dataclasses.replace(node, ship_lib=False))
    host = client.api.host_config
    assert host["cap_drop"] == ["ALL"]
    assert host["cap_add"] == ["NET_ADMIN"]
    assert host["security_opt"] == ["no-new-privileges"]
    assert host["pids_limit"] == PIDS_LIMIT
    assert host["init"] is True
    assert client.api.container["user"] is None
    assert not client.containers.one.archives


def test_redis_gets_its_password_as_a_file_it_alone_can_read(backend: DockerBackend) -> None:
    node = redis_plan("10.99.0.12", "raychaos/base:bookworm-x", PASSWORD)
    client = started(backend, node)
    host = client.api.host_config
    assert host["cap_drop"] == ["ALL"] and host["cap_add"] is None
    assert host["pids_limit"] == plan_module.REDIS_PIDS_LIMIT
    assert client.api.container["user"] == "redis"
    assert PASSWORD not in " ".join(client.api.container["command"])
    [(path, data)] = client.containers.one.archives
    assert path == "/"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        [member] = tar.getmembers()
        assert member.name == REDIS_CONF.lstrip("/")
        assert (member.mode, member.uid, member.gid) == (0o400, 100, 101)
        body = tar.extractfile(member)
        assert body is not None and body.read().decode() == f'requirepass "{PASSWORD}"\n'


def test_the_head_gets_its_password_file_as_root(backend: DockerBackend) -> None:
    head = redis_cluster().node("head")
    client = started(backend, dataclasses.replace(head, ship_lib=False))
    [(_, data)] = client.containers.one.archives
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        [member] = tar.getmembers()
        assert member.name == REDIS_PASSWORD_FILE.lstrip("/")
        assert (member.mode, member.uid, member.gid) == (0o400, 0, 0)
    assert PASSWORD not in " ".join(client.api.container["command"])
