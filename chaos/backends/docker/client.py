"""The one path to the cluster: a Docker client, and docker-py errors turned into ours.

Nothing here talks to container IPs; everything goes through the Docker API, so the same code
works against a remote engine (``DOCKER_HOST=ssh://…``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from chaos.errors import DockerOperationError, DockerUnavailable

if TYPE_CHECKING:
    import docker

T = TypeVar("T")


def connect(timeout: float = 120.0) -> docker.DockerClient:
    """A client for ``DOCKER_HOST`` (or the local socket), checked with a ping."""
    import docker
    import docker.errors

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise DockerUnavailable(
            f"cannot reach the Docker daemon at {where}: {_first_line(exc)}",
            hint="start it (e.g. `sudo systemctl start docker`) or point DOCKER_HOST at a "
            "running engine, then check with `docker info`",
        ) from exc
    return client


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Re-raise docker-py errors as :class:`DockerOperationError` naming what we were doing."""
    import docker.errors
    import requests

    try:
        yield
    except docker.errors.APIError as exc:
        explanation = exc.explanation or str(exc)
        raise DockerOperationError(
            f"{what} failed: {explanation}", hint="see `docker info` and the daemon's log"
        ) from exc
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise DockerUnavailable(
            f"{what} failed: lost the Docker daemon ({_first_line(exc)})",
            hint="check that the daemon is still running (`docker info`)",
        ) from exc


def call(what: str, fn: Callable[[], T]) -> T:
    with translated(what):
        return fn()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
