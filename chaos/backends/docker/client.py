"""The one path to the cluster: a Docker client, and docker-py errors turned into ours.

Nothing here talks to container IPs; everything goes through the Docker API, so the same code
works against a remote engine (``DOCKER_HOST=ssh://…``, ``tcp://…`` with TLS) and against
several engines at once (:mod:`chaos.backends.docker.engines`): :func:`connect` takes the
engine's URL.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from chaos.errors import DockerOperationError, DockerUnavailable

if TYPE_CHECKING:
    import docker

T = TypeVar("T")

#: The engine docker-py (and the docker CLI) use when DOCKER_HOST is not set.
LOCAL_SOCKET = "unix:///var/run/docker.sock"


class EngineLost(DockerUnavailable):
    """An engine of the run stopped answering mid-run: the experiments it hosted end broken
    (one line naming the engine); the other engines' experiments go on."""


class EngineUnresponsive(DockerUnavailable):
    """The engine took a request but gave no answer within its bound (a hung or overloaded
    daemon, a dead link to a remote engine): one line naming the call and the bound."""


def connect(timeout: float = 120.0, url: str | None = None) -> docker.DockerClient:
    """A client for the engine at ``url`` (default ``DOCKER_HOST``, else the local socket),
    checked with a ping.

    TLS comes from the environment as for the docker CLI (``DOCKER_TLS_VERIFY``,
    ``DOCKER_CERT_PATH``) and applies to ``tcp://`` engines; ``ssh://`` uses paramiko when it
    is installed (``pip install docker[ssh]``), else the ``ssh`` command (your ssh config,
    agent and known hosts).
    """
    import docker
    import docker.errors

    where = url or os.environ.get("DOCKER_HOST", LOCAL_SOCKET)
    try:
        if url is None:
            client = docker.from_env(timeout=int(timeout))
        else:
            client = docker.DockerClient(**client_kwargs(url, timeout))
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        raise DockerUnavailable(
            f"cannot reach the Docker daemon at {where}: {first_line(exc)}",
            hint="start it (e.g. `sudo systemctl start docker`) or point DOCKER_HOST (or "
            "--raychaos-docker-host) at a running engine, then check with `docker info`",
        ) from exc
    return client


def client_kwargs(url: str, timeout: float) -> dict[str, Any]:
    """docker-py's keyword arguments for ``url``: TLS from the environment for ``tcp://``
    and ``https://``, the ``ssh`` command for ``ssh://`` when paramiko is missing."""
    from docker.utils import kwargs_from_env

    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    kwargs: dict[str, Any] = dict(kwargs_from_env(environment=env))
    kwargs["base_url"] = url
    kwargs["timeout"] = int(timeout)
    if not url.startswith(("tcp://", "https://")):
        kwargs.pop("tls", None)
    if url.startswith("ssh://"):
        kwargs["use_ssh_client"] = importlib.util.find_spec("paramiko") is None
    return kwargs


def answers(url: str | None, timeout: float = 10.0) -> str | None:
    """None when the engine at ``url`` answers a ping within ``timeout``, else why not (one
    line). A fresh client each time: a client whose engine died may hold a dead connection."""
    try:
        client = connect(timeout=timeout, url=url)
    except DockerUnavailable as exc:
        cause = exc.__cause__ or exc
        return first_line(cause)
    client.close()
    return None


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
    except (requests.exceptions.Timeout, TimeoutError) as exc:
        # Before ConnectionError: a ConnectTimeout is both. A ReadTimeout is neither a
        # DockerException nor a ConnectionError, and would escape as a raw traceback.
        raise EngineUnresponsive(
            f"{what} failed: expected the Docker daemon to answer within the client's "
            f"timeout, got no answer ({first_line(exc)})",
            hint="the daemon is hung or overloaded: check `docker info` and its log (a hung "
            "dockerd needs a restart)",
        ) from exc
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise DockerUnavailable(
            f"{what} failed: lost the Docker daemon ({first_line(exc)})",
            hint="check that the daemon is still running (`docker info`)",
        ) from exc


def call(what: str, fn: Callable[[], T]) -> T:
    with translated(what):
        return fn()


def first_line(exc: BaseException) -> str:
    """An error in one line of at most 300 characters (its class when it says nothing)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
