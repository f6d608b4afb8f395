"""``raychaos bench boot``: what the harness costs over booting Ray by hand.

Both sides boot head + 2 workers from the same image on the same kind of network through the
same Docker SDK. The *bare chain* is what a person would script: ``docker run`` the containers,
``ray start --head`` in one, then ``ray start --address`` in the others, done when the
commands return. The *harness* is :class:`~chaos.cluster.Cluster.start`: validation, fixed
addresses, shipped agent, and readiness = every node ALIVE in the GCS per the State API.
Runs alternate between the two so that drift in machine load hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chaos import labels
from chaos.backends.docker import docker_backend
from chaos.backends.docker.probes import bare_chain, peak_memory
from chaos.cluster.cluster import Cluster
from chaos.spec.topology import ClusterSpec, NodeSpec

if TYPE_CHECKING:
    from chaos.backends.docker import DockerClient
    from chaos.backends.docker.images import ImageBuilder


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


def boot_harness(
    client: DockerClient,
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
            seconds, peak_memory(client, {n: str(c.id) for n, c in backend.containers.items()})
        )
    finally:
        cluster.stop()


def boot_bare(
    client: DockerClient, image: str, identity: labels.RunIdentity, index: int
) -> BootSample:
    """The hand-written chain: no validation, no fixed IPs, no readiness beyond `ray start`."""
    return BootSample(*bare_chain(client, image, identity, index))


def bench_boot(
    client: DockerClient,
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
