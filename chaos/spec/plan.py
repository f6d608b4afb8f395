"""A cluster's layout, computed once from its spec: names, addresses, images, argv, env, limits.

The plan is a frozen value and a pure function of the spec, the subnet the backend gave and
the images it resolved, so what a backend will create can be read (and tested) before anything
exists. Backends realise it; nothing re-reads the spec node by node.

It also fixes each host's privileges (docs/posture.md): the Linux capabilities it keeps (all
others dropped), its process/thread limit, the user its main process runs as, and the secret
files put into it before it starts (so no secret is on a command line we write).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import chaos.spec.autoscaling as autoscaling
from chaos.spec.topology import ClusterSpec, NodeSpec, group_names, parse_size

Role = Literal["head", "worker", "driver", "redis"]
GCS_PORT = 6379
REDIS_PORT = 6379
DASHBOARD_PORT = 8265
#: Fixed per-node agent ports. With port 0 (Ray's default) the raylet waits a hard-coded 15 s
#: for each agent's port file and aborts when a loaded machine starts the agents slower; a
#: port passed to the raylet (metrics agent, metrics export, runtime env) skips its wait. The
#: listen port is never passed to the raylet, so that wait stays (see chaos.cluster.boot_slots).
#: Each node has its own network namespace: no clashes.
AGENT_PORTS = {
    "--metrics-export-port": 8080,
    "--dashboard-agent-grpc-port": 8081,
    "--runtime-env-agent-port": 8082,
    "--dashboard-agent-listen-port": 52365,
}
RAY_LOGS = "/tmp/ray/session_latest/logs"
#: Where shipped code (agent, workloads) lives in every node; on the image's PYTHONPATH.
LIB_DIR = "/raychaos/lib"
GCS_STORAGE_DIR = "/raychaos/gcs"
NODE_ENTRY = "/usr/local/bin/raychaos-node-entry"
#: Redis's own memory limit: it holds a few MB of GCS tables.
REDIS_MEMORY = 256 * 1024**2
#: Host part of fixed addresses inside the cluster's subnet.
HOSTS = {"head": 10, "driver": 11, "redis": 12}
FIRST_WORKER_HOST = 20
LAST_HOST = 250
#: The zero-CPU node that hosts workload drivers.
DRIVER_SPEC = NodeSpec(name="driver", num_cpus=0, memory="1g", object_store="100m")

# -- privileges (docs/posture.md) ---------------------------------------------------------
#: The only capabilities a Ray node keeps; every other one is dropped. Ray runs as root in the
#: node and touches only files root owns (/tmp/ray, /dev/shm, /raychaos, tmpfs mounts), and
#: the faults exec'd into it (kill, ps, ray stop, fallocate) act on root's own processes and
#: files: none of that needs a capability. Docker's other defaults (CHOWN, DAC_OVERRIDE,
#: FOWNER, FSETID, KILL, SETUID, SETGID, SETPCAP, SETFCAP, NET_RAW, NET_BIND_SERVICE,
#: SYS_CHROOT, MKNOD, AUDIT_WRITE) are unused there.
RAY_CAPABILITIES: Mapping[str, str] = MappingProxyType(
    {
        "NET_ADMIN": "iptables (Partition, Degrade's loss fallback, PEND-05's DROP rule) and "
        "tc netem (Degrade) inside the node's own network namespace",
    }
)
#: Redis runs as the image's unprivileged ``redis`` user and nothing is exec'd into it but
#: ``kill -9 -1`` (as that same user): no capability at all.
REDIS_CAPABILITIES: Mapping[str, str] = MappingProxyType({})
REDIS_USER = "redis"
#: Threads, not processes: the pids cgroup counts every task. Peaks sampled every 2 s over a
#: full experiment suite on a 2-core host: a head 706 tasks in 39 processes (gcs_server,
#: raylet, dashboard and its 9 module processes, agents, ~22 threads per Ray worker process),
#: a worker 240, a driver node 147; all containers together 2747. gRPC and asio pools grow
#: with the host's cores (a CPU limit does not shrink them), so a big host with dozens of
#: workers on a node may need a few thousand; 8192 (11x the head's peak here) leaves that
#: margin and still keeps one runaway node to a quarter of a default pid_max (32768).
PIDS_LIMIT = 8192
#: redis-server peaked at 7 tasks (same sampling); the rest is room for exec'd diagnostics.
REDIS_PIDS_LIMIT = 256
#: Redis's config file: it holds ``requirepass``, so the password is not on its argv.
REDIS_CONF = "/etc/raychaos/redis.conf"
#: The Redis password on the head, read by its ``ray start`` (see HEAD_START_WITH_SECRET).
REDIS_PASSWORD_FILE = "/raychaos/secrets/redis-password"  # noqa: S105 - a path
#: ``ray start`` on a head that talks to a password-protected Redis: Ray's own CLI entry point
#: (what the ``ray`` script runs) with ``--redis-password`` appended in-process from
#: REDIS_PASSWORD_FILE, so the password is on no command line we write. Ray itself then puts
#: it on the argv of gcs_server, the raylet and the head's workers (docs/posture.md).
HEAD_START_WITH_SECRET = (
    "import sys\n"
    "from ray.scripts.scripts import main\n"
    f"with open({REDIS_PASSWORD_FILE!r}) as f:\n"
    "    secret = f.read().strip()\n"
    "sys.argv = ['ray', *sys.argv[1:], '--redis-password=' + secret]\n"
    "sys.exit(main())\n"
)

#: (Ray version, image) for a node spec; the backend builds the image on first use.
ImageFor = Callable[[NodeSpec], tuple[str, str]]


@dataclass(frozen=True)
class NodePlan:
    """One host of the cluster as the backend will create it."""

    name: str
    role: Role
    ip: str
    image: str
    #: The node's ``ray start`` (or Redis) command line; never holds a secret.
    argv: tuple[str, ...]
    env: Mapping[str, str]
    #: None: the image's own entry point (Redis); otherwise our node entry.
    entrypoint: tuple[str, ...] | None
    memory_bytes: int
    shm_bytes: int | None = None
    cpu_limit: float | None = None
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    #: volume name → mount path.
    volumes: Mapping[str, str] = field(default_factory=dict)
    #: Copy the agent and workload packages in before the node starts.
    ship_lib: bool = True
    ray_version: str | None = None
    spec: NodeSpec | None = None
    #: Linux capabilities the host keeps (every other one is dropped), with the reason each.
    capabilities: Mapping[str, str] = field(default_factory=lambda: RAY_CAPABILITIES)
    #: Tasks (threads) the host may have at once.
    pids_limit: int = PIDS_LIMIT
    #: The user the host's processes run as (None: the image's, root). Commands exec'd into
    #: the host run as this user too.
    user: str | None = None
    #: path → content, put into the host before it starts, mode 0400, owned by ``user``.
    secret_files: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: path → content, put into the host before it starts, mode 0644 (no secret).
    files: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "tmpfs", MappingProxyType(dict(self.tmpfs)))
        object.__setattr__(self, "volumes", MappingProxyType(dict(self.volumes)))
        object.__setattr__(self, "capabilities", MappingProxyType(dict(self.capabilities)))
        object.__setattr__(self, "secret_files", MappingProxyType(dict(self.secret_files)))
        object.__setattr__(self, "files", MappingProxyType(dict(self.files)))

    @property
    def expect_join(self) -> bool:
        return self.role != "redis" and (self.spec is None or self.spec.expect_join)


@dataclass(frozen=True)
class ClusterPlan:
    """Every host of one cluster, head first, Redis (if any) last."""

    name: str
    subnet: ipaddress.IPv4Network
    nodes: tuple[NodePlan, ...]
    redis_password: str | None = field(default=None, repr=False)

    @property
    def head_ip(self) -> str:
        return address(self.subnet, HOSTS["head"])

    @property
    def gcs_address(self) -> str:
        return f"{self.head_ip}:{GCS_PORT}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.head_ip}:{DASHBOARD_PORT}"

    def node(self, name: str) -> NodePlan:
        return next(n for n in self.nodes if n.name == name)


def address(subnet: ipaddress.IPv4Network, host: int) -> str:
    return str(subnet.network_address + host)


def plan_cluster(
    spec: ClusterSpec,
    *,
    subnet: ipaddress.IPv4Network,
    image_for: ImageFor,
    base_image: str | None = None,
    redis_password: str | None = None,
    gcs_volume: str | None = None,
) -> ClusterPlan:
    """The whole layout of ``spec`` in ``subnet``. Redis needs ``base_image`` and a password."""
    head_ip = address(subnet, HOSTS["head"])
    ctx = _Context(spec, head_ip, image_for, redis_password, gcs_volume, subnet)
    nodes = [ctx.node(spec.head.name, "head", spec.head, head_ip)]
    host = FIRST_WORKER_HOST
    for group in spec.workers:
        for name in group_names(group):
            nodes.append(ctx.node(name, "worker", group, address(subnet, host)))
            host += 1
    if spec.driver:
        nodes.append(ctx.node("driver", "driver", DRIVER_SPEC, address(subnet, HOSTS["driver"])))
    if spec.gcs_ft == "redis":
        if base_image is None or redis_password is None:
            raise ValueError("a Redis GCS needs a base image and a password")
        nodes.append(redis_plan(address(subnet, HOSTS["redis"]), base_image, redis_password))
    return ClusterPlan(spec.name, subnet, tuple(nodes), redis_password)


def plan_group(
    spec: ClusterSpec,
    group: NodeSpec,
    *,
    subnet: ipaddress.IPv4Network,
    taken: set[str],
    image_for: ImageFor,
) -> list[NodePlan]:
    """Hosts for a worker group added to a running cluster, on addresses not in ``taken``."""
    ctx = _Context(spec, address(subnet, HOSTS["head"]), image_for, None, None, subnet)
    free = (h for h in range(FIRST_WORKER_HOST, LAST_HOST) if address(subnet, h) not in taken)
    return [
        ctx.node(name, "worker", group, address(subnet, next(free))) for name in group_names(group)
    ]


def redis_plan(ip: str, image: str, password: str) -> NodePlan:
    """Redis as the GCS's store: unprivileged, its password in a config file, not on argv."""
    argv = (
        "redis-server",
        REDIS_CONF,  # first: the options below add to it
        "--port",
        str(REDIS_PORT),
        "--bind",
        "0.0.0.0",  # noqa: S104 - the cluster network only; no port is published
        "--protected-mode",
        "no",
        "--appendonly",
        "yes",
        "--dir",
        "/var/lib/redis",  # the redis user's own directory in Debian's package
        "--save",
        "",
    )
    return NodePlan(
        name="redis",
        role="redis",
        ip=ip,
        image=image,
        argv=argv,
        env={},
        entrypoint=None,
        memory_bytes=REDIS_MEMORY,
        ship_lib=False,
        capabilities=REDIS_CAPABILITIES,
        pids_limit=REDIS_PIDS_LIMIT,
        user=REDIS_USER,
        secret_files={REDIS_CONF: f'requirepass "{password}"\n'},
    )


@dataclass(frozen=True)
class _Context:
    spec: ClusterSpec
    head_ip: str
    image_for: ImageFor
    redis_password: str | None
    gcs_volume: str | None
    subnet: ipaddress.IPv4Network

    def node(self, name: str, role: Role, node: NodeSpec, ip: str) -> NodePlan:
        version, image = self.image_for(node)
        volumes = {}
        if role == "head" and self.spec.gcs_ft == "rocksdb" and self.gcs_volume:
            volumes[self.gcs_volume] = GCS_STORAGE_DIR
        argv = self.ray_start_argv(name, role, node, ip)
        secret_files = {}
        if role == "head" and self.redis_password:
            # Ray's CLI in-process, the password read from a file (see HEAD_START_WITH_SECRET).
            argv = ["python3", "-c", HEAD_START_WITH_SECRET, *argv[1:]]
            secret_files[REDIS_PASSWORD_FILE] = self.redis_password
        files = autoscaler_files(self.spec, ip) if role == "head" else {}
        return NodePlan(
            name=name,
            role=role,
            ip=ip,
            image=image,
            argv=tuple(argv),
            env=self.env(role, node),
            files=files,
            entrypoint=(NODE_ENTRY,),
            memory_bytes=node.memory_bytes,
            shm_bytes=node.shm_bytes,
            cpu_limit=node.cpu_limit,
            tmpfs=node.tmpfs,
            volumes=volumes,
            ray_version=version,
            spec=node,
            secret_files=secret_files,
        )

    def ray_start_argv(self, name: str, role: Role, node: NodeSpec, ip: str) -> list[str]:
        """The ``ray start`` command line of one node (no ``--block``: see node-entry.sh);
        a Redis password is added from a file at start (see :meth:`node`), never here."""
        argv = ["ray", "start", f"--node-ip-address={ip}", "--disable-usage-stats"]
        if role == "head":
            argv += [
                "--head",
                f"--port={GCS_PORT}",
                "--dashboard-host=0.0.0.0",  # cluster network only, no published port
                f"--dashboard-port={DASHBOARD_PORT}",
                "--include-dashboard=true",
            ]
        else:
            argv.append(f"--address={node.head_address or f'{self.head_ip}:{GCS_PORT}'}")
        argv += [
            f"--num-cpus={_num(node.num_cpus)}",
            f"--num-gpus={_num(node.num_gpus)}",
            f"--object-store-memory={node.object_store_bytes}",
        ]
        if node.ray_memory is not None:
            argv.append(f"--memory={parse_size(node.ray_memory, 'ray_memory')}")
        if node.resources:
            argv.append(f"--resources={json.dumps(dict(node.resources))}")
        node_labels = {"raychaos/node": name, **dict(node.labels)}
        argv.append("--labels=" + ",".join(f"{k}={v}" for k, v in node_labels.items()))
        given = {arg.split("=", 1)[0] for arg in node.extra_args}
        argv += [f"{flag}={port}" for flag, port in AGENT_PORTS.items() if flag not in given]
        argv += list(node.extra_args)
        if role == "head" and self.spec.autoscaling is not None:
            argv.append(f"--autoscaling-config={autoscaling.BOOTSTRAP_CONFIG}")
        return argv

    def env(self, role: Role, node: NodeSpec) -> dict[str, str]:
        env = {"RAY_USAGE_STATS_ENABLED": "0", "RAYCHAOS_NODE": node.name}
        env.update(self.spec.env)
        env.update(node.env)
        if role == "head" and self.spec.gcs_ft == "redis":
            env["RAY_REDIS_ADDRESS"] = f"{address(self.subnet, HOSTS['redis'])}:{REDIS_PORT}"
        if role == "head" and self.spec.autoscaling is not None:
            env.update(autoscaling.head_env(self.spec.autoscaling))
        if role == "head" and self.spec.gcs_ft == "rocksdb":
            env.setdefault("RAY_gcs_storage", "rocksdb")
            env.setdefault("RAY_gcs_storage_path", GCS_STORAGE_DIR)
        return env


def autoscaler_files(spec: ClusterSpec, head_ip: str) -> dict[str, str]:
    """The provider's directory on an autoscaling head, as it must be before ``ray start``:
    the cluster config, the marker that says "inside a container" (else the provider runs
    ssh-keygen), and a status naming the head running (else it drops the head)."""
    if spec.autoscaling is None:
        return {}
    config = autoscaling.cluster_config(
        spec.autoscaling, cluster_name=spec.name, head_cpus=spec.head.num_cpus
    )
    head = {autoscaling.HEAD_ID: {"State": "running", "IP": head_ip, "Name": spec.head.name}}
    return {
        autoscaling.BOOTSTRAP_CONFIG: json.dumps(config, indent=1),
        f"{autoscaling.STATE_DIR}/.in_docker": "",
        f"{autoscaling.STATE_DIR}/status.json": json.dumps(head),
    }


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
