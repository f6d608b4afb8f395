"""The Docker backend: the only code that imports docker-py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chaos import labels

if TYPE_CHECKING:
    import docker
    from docker import DockerClient as DockerClient

    from chaos.backends.docker.backend import DockerBackend
    from chaos.backends.docker.images import ImageBuilder


def docker_backend(
    cluster_name: str,
    *,
    client: docker.DockerClient | None = None,
    builder: ImageBuilder | None = None,
    identity: labels.RunIdentity | None = None,
    tag: str = "c",
    test_id: str = "",
    workload_paths: Sequence[Path] = (),
) -> DockerBackend:
    """A Docker backend for one cluster: the engine of ``DOCKER_HOST`` unless ``client`` given."""
    from chaos.backends.docker.backend import DockerBackend
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.images import ImageBuilder

    client = client or connect()
    identity = identity or labels.RunIdentity()
    return DockerBackend(
        client,
        builder=builder or ImageBuilder(client),
        identity=identity,
        key=identity.name(tag, cluster_name),
        test_id=test_id,
        workload_paths=workload_paths,
    )
