"""``raychaos bench boot``: what the harness costs over booting Ray by hand.

Both sides boot head + 2 workers from the same image on the same kind of network through the
same Docker SDK. The *bare chain* is what a person would script: ``docker run`` the containers,
``ray start --head`` in one, then ``ray start --address`` in the others, done when the
commands return. The *harness* is :class:`~chaos.cluster.Cluster.start`: validation, fixed
addresses, shipped agent, and readiness = every node ALIVE in the GCS per the State API.
Runs alternate between the two so that drift in machine load hits both alike.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker import docker_backend
from chaos.backends.docker.client import call
from chaos.backends.docker.images import ImageBuilder
from chaos.cluster.cluster import Cluster
from chaos.errors import ChaosError
from chaos.spec.topology import ClusterSpec, NodeSpec

if TYPE_CHECKING:
    import docker


def bench_spec(ray_version: str) -> ClusterSpec:
    return ClusterSpec(
        name="bench",
        ray_version=ray_version,
        head=NodeSpec(name="head", num_cpus=1),
        workers=(NodeSpec(name="worker", count=2, num_cpus=1),),
        driver=False,
    )


@dataclass
class BootSample:
    seconds: float
    #: Peak memory (bytes) per node name, from the container's cgroup.
    peak_memory: dict[str, int] = field(default_factory=dict)


@dataclass
class BenchResult:
    harness: list[BootSample]
    bare: list[BootSample]

    @property
    def harness_median(self) -> float:
        return statistics.median(s.seconds for s in self.harness)

    @property
    def bare_median(self) -> float:
        return statistics.median(s.seconds for s in self.bare)

    @property
    def ratio(self) -> float:
        return self.harness_median / self.bare_median

    def table(self) -> str:
        def peaks(samples: list[BootSample]) -> str:
            names = sorted({n for s in samples for n in s.peak_memory})
            return ", ".join(
                f"{n} {statistics.median(s.peak_memory.get(n, 0) for s in samples) / 2**20:.0f} MiB"
                for n in names
            )

        rows = [
            "| chain | runs | median boot (s) | min–max (s) | median peak memory per node |",
            "|---|---|---|---|---|",
        ]
        for label, samples, median in (
            ("bare (`docker run` + `ray start`)", self.bare, self.bare_median),
            ("harness (`Cluster.start`, ready = ALIVE in GCS)", self.harness, self.harness_median),
        ):
            times = [s.seconds for s in samples]
            rows.append(
                f"| {label} | {len(samples)} | {median:.2f} | {min(times):.2f}–{max(times):.2f} "
                f"| {peaks(samples)} |"
            )
        rows.append(f"\nratio harness / bare (medians): **{self.ratio:.2f}×**")
        return "\n".join(rows)


def _peaks(client: docker.DockerClient, containers: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, cid in containers.items():
        stats: dict[str, Any] = client.containers.get(cid).stats(stream=False)  # type: ignore[assignment]
        memory = stats.get("memory_stats", {})
        out[name] = int(memory.get("max_usage") or memory.get("usage") or 0)
    return out


def boot_harness(
    client: docker.DockerClient,
    builder: ImageBuilder,
    spec: ClusterSpec,
    identity: labels.RunIdentity,
    index: int,
) -> BootSample:
    backend = docker_backend(
        spec.name, client=client, builder=builder, identity=identity, tag=f"h{index}"
    )
    cluster = Cluster(spec, backend)
    try:
        started = time.monotonic()
        cluster.start()
        seconds = time.monotonic() - started
        return BootSample(
            seconds, _peaks(client, {n: str(c.id) for n, c in backend.containers.items()})
        )
    finally:
        cluster.stop()


def boot_bare(
    client: docker.DockerClient, image: str, identity: labels.RunIdentity, index: int
) -> BootSample:
    """The hand-written chain: no validation, no fixed IPs, no readiness beyond `ray start`."""
    owner = identity.labels(cluster=identity.name(f"b{index}"))
    containers: dict[str, str] = {}
    network = None
    try:
        started = time.monotonic()
        network = call(
            "create network",
            lambda: client.networks.create(
                identity.name(f"b{index}"), driver="bridge", internal=True, labels=owner
            ),
        )

        def run(name: str) -> str:
            container = client.containers.run(
                image,
                ["sleep", "infinity"],
                name=identity.name(f"b{index}", name),
                hostname=name,
                network=network.name,
                detach=True,
                init=True,
                labels=owner,
                shm_size=100 * 2**20 + 64 * 2**20,
                mem_limit="2g",
            )
            return str(container.id)

        names = ["head", "worker-1", "worker-2"]
        with ThreadPoolExecutor(3) as pool:
            containers = dict(zip(names, pool.map(run, names), strict=True))

        def ray_start(name: str, args: list[str]) -> None:
            container = client.containers.get(containers[name])
            ip = container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
            result = container.exec_run(
                [
                    "ray",
                    "start",
                    f"--node-ip-address={ip}",
                    "--num-cpus=1",
                    "--object-store-memory=104857600",
                    "--disable-usage-stats",
                    *args,
                ]
            )
            if result.exit_code != 0:
                output = bytes(result.output)  # type: ignore[arg-type]
                raise ChaosError(f"bare ray start on {name} failed: {output[-500:]!r}")

        ray_start("head", ["--head", "--port=6379", "--dashboard-host=0.0.0.0"])
        head_ip = client.containers.get(containers["head"]).attrs["NetworkSettings"]["Networks"][
            network.name
        ]["IPAddress"]
        with ThreadPoolExecutor(2) as pool:
            list(
                pool.map(
                    lambda n: ray_start(n, [f"--address={head_ip}:6379"]), ["worker-1", "worker-2"]
                )
            )
        seconds = time.monotonic() - started
        return BootSample(seconds, _peaks(client, containers))
    finally:
        # Best effort: what stays behind is labelled, and the next sweep removes it.
        for cid in containers.values():
            with contextlib.suppress(Exception):
                client.containers.get(cid).remove(force=True)
        if network is not None:
            with contextlib.suppress(Exception):
                network.remove()


def bench_boot(
    client: docker.DockerClient,
    builder: ImageBuilder,
    ray_version: str,
    runs: int = 5,
    progress: Callable[[str], None] = print,
) -> BenchResult:
    spec = bench_spec(ray_version)
    image = builder.ensure(ray_version)
    identity = labels.RunIdentity(worker="bench")
    result = BenchResult(harness=[], bare=[])
    # One warm-up of each (page cache, image layers), not counted.
    boot_bare(client, image, identity, 0)
    boot_harness(client, builder, spec, identity, 0)
    for index in range(1, runs + 1):
        bare = boot_bare(client, image, identity, index)
        harness = boot_harness(client, builder, spec, identity, index)
        result.bare.append(bare)
        result.harness.append(harness)
        progress(f"run {index}/{runs}: bare {bare.seconds:.2f} s, harness {harness.seconds:.2f} s")
    return result
