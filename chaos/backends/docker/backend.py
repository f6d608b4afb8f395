"""The Docker backend: a cluster plan realised as containers on one internal bridge network.

One container per host, fixed addresses on the cluster's own network (a restarted node keeps
its IP), ``shm_size`` covering the object store, cgroup memory (and optional CPU) limits, no
published ports. Everything goes through the Docker API, so a remote engine
(``DOCKER_HOST=ssh://…``) works the same. Every object carries the run's labels.

Posture (docs/posture.md): every capability dropped but the plan's few, a PID limit,
``no-new-privileges``, secrets put in as files before start, and a network the host has no
address on, so it cannot route into the cluster (only the Docker API reaches it).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from chaos import labels
from chaos.backends.base import HOST_STATES, EventSink, ExecResult, HostState
from chaos.backends.docker.client import call, translated
from chaos.backends.docker.containers import (
    explained_if_stopped,
    host_config,
    ids_of,
    lib_archive,
    secrets_archive,
)
from chaos.backends.docker.execstream import (
    KILL_AFTER_S,
    ExecStream,
    drain,
    host_bound,
    in_node_bound,
)
from chaos.backends.docker.images import ImageBuilder
from chaos.backends.docker.images.derived import derive
from chaos.backends.docker.pressure import PressureFiles
from chaos.errors import ChaosError, DockerOperationError, WorkloadError
from chaos.resources import agent_path

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container
    from docker.models.networks import Network

    from chaos.spec.image_contract import ImageProbe
    from chaos.spec.plan import NodePlan

#: An exec whose output has ended gets this long to be reaped before its exit code is unknown.
EXEC_REAP_S = 10.0
#: What an exec with no exit code reports: never mistaken for success.
EXIT_UNKNOWN = -1
#: How often to ask the daemon for a free subnet when a concurrent run takes it first.
NETWORK_ATTEMPTS = 5
#: Bridge options of every cluster network. ``inhibit_ipv4``: the daemon gives the bridge (the
#: host's side) no address in the subnet, so the host has no route into it and cannot reach
#: the GCS, Redis or the dashboard; containers still reach each other on the bridge, and
#: ``internal`` keeps them from reaching out.
NETWORK_OPTIONS = {"com.docker.network.bridge.inhibit_ipv4": "true"}


class DockerBackend:
    """The Docker objects of one cluster, created and removed through one client."""

    kind = "docker"

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        builder: ImageBuilder,
        identity: labels.RunIdentity,
        key: str,
        test_id: str = "",
        workload_paths: Sequence[Path] = (),
    ) -> None:
        self.client = client
        self.builder = builder
        self.identity = identity
        #: The ``raychaos.cluster`` label and name prefix of every object of this cluster.
        self.key = key
        self.test_id = test_id
        self.workload_paths = tuple(workload_paths)
        self.containers: dict[str, Container] = {}
        self.network: Network | None = None
        self.volumes: list[str] = []
        self._lib_tar: bytes | None = None
        #: Each node's cgroup ``cpu.pressure`` file, once found (:meth:`cpu_stalled_s`).
        self._pressure = PressureFiles()

    # -- life cycle ----------------------------------------------------------------------
    def ensure_image(self, ray_version: str, python: str) -> str:
        return self.builder.ensure(ray_version, python)

    def node_image(self, image: str) -> ImageProbe | None:
        return derive(self.builder, image, self._labels(purpose="probe"))

    def cpus(self) -> int:
        info = call("docker info", self.client.info)
        return int(info.get("NCPU") or 0)

    def ensure_base_image(self, python: str) -> str:
        return self.builder.ensure_base(python)

    def create_network(self) -> ipaddress.IPv4Network:
        import docker.types

        owner = self._labels()
        last_error: Exception | None = None
        for _ in range(NETWORK_ATTEMPTS):
            # Ask the daemon for a free subnet, then pin it, so nodes can have fixed addresses.
            probe = call(
                "create network",
                lambda: self.client.networks.create(
                    self.key + "-probe",
                    driver="bridge",
                    internal=True,
                    labels=owner,
                    options=NETWORK_OPTIONS,
                ),
            )
            try:
                subnet = ipaddress.ip_network(probe.attrs["IPAM"]["Config"][0]["Subnet"])
            finally:
                call("remove network", probe.remove)
            if not isinstance(subnet, ipaddress.IPv4Network):
                raise DockerOperationError(f"daemon gave an IPv6 subnet {subnet}")
            gateway = str(subnet.network_address + 1)
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=gateway)]
            )
            try:
                with translated("create network"):
                    self.network = self.client.networks.create(
                        self.key,
                        driver="bridge",
                        internal=True,
                        ipam=ipam,
                        labels=owner,
                        options=NETWORK_OPTIONS,
                        check_duplicate=True,
                    )
            except DockerOperationError as exc:
                last_error = exc  # another run took the subnet in between: ask again
                continue
            return subnet
        raise DockerOperationError(f"could not create network {self.key}: {last_error}")

    def create_volume(self, purpose: str) -> str:
        name = f"{self.key}-{purpose}"[:63]
        call("create volume", lambda: self.client.volumes.create(name, labels=self._labels()))
        self.volumes.append(name)
        return name

    def start_node(self, node: NodePlan) -> None:
        if self.network is None:
            raise ChaosError(f"start_node({node.name}) before create_network: a backend bug")
        api = self.client.api
        # The node's name is kept whole (≤ 20 characters): names stay unique after truncation.
        full_name = f"{self.key[: 62 - len(node.name)].rstrip('-')}-{node.name}"
        with translated(f"create container {full_name}"):
            created = api.create_container(
                node.image,
                command=list(node.argv),
                entrypoint=list(node.entrypoint) if node.entrypoint else None,
                name=full_name,
                hostname=node.name,
                user=node.user,
                environment=dict(node.env),
                labels=self._labels(role=node.role, node=node.name),
                host_config=api.create_host_config(**host_config(node)),
                networking_config=api.create_networking_config(
                    {
                        str(self.network.name): api.create_endpoint_config(
                            ipv4_address=node.ip, aliases=[node.name]
                        )
                    }  # type: ignore[arg-type]
                ),
                detach=True,
            )
            container = self.client.containers.get(created["Id"])
            self.containers[node.name] = container
            if node.ship_lib:
                container.put_archive("/", self._lib_archive())
            for files, mode in ((node.secret_files, 0o400), (node.files, 0o644)):
                if files:
                    uid, gid = ids_of(container, node.user)
                    if not container.put_archive("/", secrets_archive(files, uid, gid, mode)):
                        raise DockerOperationError(f"putting files into {full_name} refused")
            container.start()

    def teardown(self) -> list[str]:
        """Containers in parallel (each call bounded), then network, volumes; gone is fine."""
        from chaos.backends.docker.sweep import remove_parallel

        _, failures = remove_parallel("container", self._all_containers())
        if self.network is not None:
            failures += remove_parallel("network", [self.network])[1]
        volumes = [self.client.volumes.prepare_model({"Name": v}) for v in self.volumes]
        failures += remove_parallel("volume", volumes)[1]
        return failures

    def remove_node(self, node: str) -> None:
        from chaos.backends.docker.sweep import remove_parallel

        container = self.containers.pop(node, None)
        failures = remove_parallel("container", [container] if container else [])[1]
        if failures:
            raise DockerOperationError("; ".join(failures))

    def describe(self, node: str) -> str:
        return str(self._container(node).name)

    def inspect_hints(self, node: str) -> list[str]:
        name = self.describe(node)
        return [
            f"docker ps --filter label={labels.CLUSTER}={self.key}",
            f"docker exec -it {name} ray status",
            f"docker logs {name}",
        ]

    # -- inside a node -------------------------------------------------------------------
    def exec(
        self, node: str, argv: Sequence[str], *, timeout: float, env: Mapping[str, str]
    ) -> ExecResult:
        container = self._container(node)
        bounded = ["timeout", f"--kill-after={KILL_AFTER_S}", str(in_node_bound(timeout)), *argv]
        api = self.client.api
        what = f"exec {argv[0]} in {container.name}"
        with explained_if_stopped(self._container(node)):
            exec_id = call(
                what, lambda: api.exec_create(container.id, bounded, environment=dict(env))
            )
        # Streamed, so the wait for its end is ours to bound (drain), above the in-node one.
        raw = call(what, lambda: api.exec_start(exec_id["Id"], stream=True))
        output = drain(raw, within=host_bound(timeout), what=what).decode(errors="replace")
        code = self._exit_code(str(exec_id["Id"]), what)
        if code is None:
            # docker-py's exec_run reads this as 0; under load the output stream can end
            # before the process does (CI: a connect probe "said ''" with exit 0).
            return ExecResult(
                EXIT_UNKNOWN, output + "\n[raychaos] the exec ended with no exit code"
            )
        return ExecResult(code, output)

    def _exit_code(self, exec_id: str, what: str) -> int | None:
        """The exec's exit code once the engine says it stopped (bounded), else None."""
        info: dict[str, Any] = Retrying(
            stop=stop_after_delay(EXEC_REAP_S),
            wait=wait_fixed(0.1),
            retry=retry_if_result(lambda found: bool(found.get("Running"))),
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else {},
        )(lambda: call(what, lambda: self.client.api.exec_inspect(exec_id)))
        code = None if info.get("Running") else info.get("ExitCode")
        return int(code) if code is not None else None

    def stream(
        self,
        node: str,
        argv: Sequence[str],
        *,
        source: str,
        sink: EventSink,
        env: Mapping[str, str],
        bound_s: float,
    ) -> ExecStream:
        with explained_if_stopped(self._container(node)):
            return ExecStream(
                self._container(node), argv, source=source, sink=sink, env=env, bound_s=bound_s
            )

    def copy(self, src: str, path: str, dst: str, dest_dir: str) -> None:
        source, target = self._container(src), self._container(dst)
        with translated(f"copy {path} from {source.name} to {target.name}"):
            stream, _ = source.get_archive(path)
            if not target.put_archive(dest_dir, b"".join(stream)):
                raise DockerOperationError(f"copy {path} into {target.name}:{dest_dir} refused")

    # -- the host as a whole ----------------------------------------------------------------
    def state(self, node: str) -> HostState:
        import docker.errors

        container = self._container(node)
        with translated(f"inspect {container.name}"):
            try:
                container.reload()
            except docker.errors.NotFound:
                return "gone"
        status = str(container.status)
        return status if status in HOST_STATES else "gone"  # type: ignore[return-value]

    def started_at(self, node: str) -> float:
        container = self._container(node)
        call(f"inspect {container.name}", container.reload)
        raw = str(container.attrs["State"]["StartedAt"])[:26].rstrip("Z")
        return datetime.fromisoformat(raw + "+00:00").timestamp()

    def kill(self, node: str) -> None:
        import docker.errors

        container = self._container(node)
        # Processes first, inside the still-networked container, then the container: the
        # kernel closes their sockets while the veth is up, so peers get the FIN/RST a
        # crashed process's kernel sends. A bare `docker kill` races network teardown under
        # load (CI: a driver's NodeDiedError came 13 s after DEAD instead of at once).
        with contextlib.suppress(Exception):  # paused or already gone: the kill below does it
            container.exec_run(["kill", "-9", "-1"])
        with contextlib.suppress(docker.errors.APIError):  # already exited by itself
            container.kill("SIGKILL")

    def restart(self, node: str) -> None:
        container = self._container(node)
        call(f"restart {container.name}", lambda: container.restart(timeout=5))

    def pause(self, node: str) -> None:
        container = self._container(node)
        call(f"pause {container.name}", container.pause)

    def unpause(self, node: str) -> None:
        container = self._container(node)
        call(f"unpause {container.name}", container.unpause)

    def logs(self, node: str, *, tail: int, since: float | None = None) -> str:
        container = self._container(node)
        raw = call(
            f"logs of {container.name}",
            lambda: container.logs(tail=tail, since=since) if since else container.logs(tail=tail),
        )
        return bytes(raw).decode(errors="replace")

    def cpu_stalled_s(self, node: str) -> float | None:
        return self._pressure.read(node, self.containers.get(node))

    def set_cpu_weight(self, node: str, weight: int) -> None:
        # A node that is gone or being removed needs no share; never fail a boot for it.
        with contextlib.suppress(Exception):
            self._container(node).update(cpu_shares=weight)

    # -- helpers ---------------------------------------------------------------------------
    def _container(self, node: str) -> Container:
        try:
            return self.containers[node]
        except KeyError:
            raise WorkloadError(
                f"no container for node {node!r} in {self.key}",
                hint=f"nodes: {', '.join(self.containers) or 'none started'}",
            ) from None

    def _labels(self, **extra: str) -> dict[str, str]:
        return self.identity.labels(test=self.test_id[:200], cluster=self.key, **extra)

    def _lib_archive(self) -> bytes:
        """The agent and the workload packages, as a tar rooted at ``/`` (built once)."""
        if self._lib_tar is None:
            self._lib_tar = lib_archive([agent_path(), *self.workload_paths])
        return self._lib_tar

    def _all_containers(self) -> list[Container]:
        return cluster_containers(self.client, self.key, self.containers.values())


def cluster_containers(
    client: docker.DockerClient, key: str, held: Iterable[Container]
) -> list[Container]:
    """Every container of cluster ``key``: the ones held, and any found by its label."""
    found = {c.id: c for c in held}
    with contextlib.suppress(Exception):  # removal of the ones held goes ahead anyway
        for container in client.containers.list(
            all=True, ignore_removed=True, filters={"label": f"{labels.CLUSTER}={key}"}
        ):
            found.setdefault(container.id, container)
    return list(found.values())
