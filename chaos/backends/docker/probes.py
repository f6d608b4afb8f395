"""The raw docker-py pieces of :mod:`chaos.bench`: what a bench asks the engine directly.

The benches measure the harness against Docker itself, so a few steps must bypass the
backend: the hand-written ``docker run`` + ``ray start`` chain, a container's peak memory, an
image's Python. They live here because only this package may import docker-py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.client import call
from chaos.errors import ChaosError

if TYPE_CHECKING:
    import docker


def peak_memory(client: docker.DockerClient, containers: Mapping[str, str]) -> dict[str, int]:
    """Peak memory (bytes) per name of ``containers`` (name → id), from each cgroup."""
    out: dict[str, int] = {}
    for name, cid in containers.items():
        stats: dict[str, Any] = client.containers.get(cid).stats(stream=False)  # type: ignore[assignment]
        memory = stats.get("memory_stats", {})
        out[name] = int(memory.get("max_usage") or memory.get("usage") or 0)
    return out


def bare_chain(
    client: docker.DockerClient, image: str, identity: labels.RunIdentity, index: int
) -> tuple[float, dict[str, int]]:
    """Boot head + 2 workers by hand (no validation, no fixed IPs, no readiness beyond
    ``ray start``); the seconds it took and each node's peak memory."""
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
        return seconds, peak_memory(client, containers)
    finally:
        # Best effort: what stays behind is labelled, and the next sweep removes it.
        for cid in containers.values():
            with contextlib.suppress(Exception):
                client.containers.get(cid).remove(force=True)
        if network is not None:
            with contextlib.suppress(Exception):
                network.remove()


def image_python(
    client: docker.DockerClient, image: str, container_labels: Mapping[str, str]
) -> str:
    """The Python version (x.y.z) of ``image``'s Ray venv."""
    out = call(
        f"python version of {image}",
        lambda: client.containers.run(
            image,
            ["python", "-c", "import platform; print(platform.python_version())"],
            remove=True,
            network_mode="none",  # a version probe needs no network, nor the default bridge
            labels=dict(container_labels),
        ),
    )
    return bytes(out).decode().strip()


def image_id(client: docker.DockerClient, image: str) -> str:
    """The id of ``image`` (what a recipe digest names, so a rebuilt base changes it)."""
    return str(call("inspect base image", lambda: client.images.get(image).id))
