"""Backends realise a cluster plan: containers, processes, networks. Only they touch an engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.backends.base import Backend


def default_backend(cluster_name: str) -> Backend:
    """Docker on ``DOCKER_HOST``: the backend a cluster gets when it is given none.

    Imported on call, so the cluster runtime loads docker-py only when it boots with it.
    """
    from chaos.backends.docker import docker_backend

    return docker_backend(cluster_name)
