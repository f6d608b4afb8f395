"""The plugin's one seam to its engine backend (today Docker, :mod:`chaos.backends.docker`).

Every name the pytest side needs from a backend — connecting, engines and their placement,
image builds and probes, the reaper and the sweep, a cluster's backend — is taken from here
and nowhere else (an import-linter contract), so another backend changes this module, not
the plugin. The plugin imports it lazily, inside the fixtures and hooks that boot: docker-py
stays unloaded in a session that never uses raychaos.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.backends.docker import docker_backend, reaper
from chaos.backends.docker.client import EngineLost, connect
from chaos.backends.docker.engines import (
    EnginePool,
    EngineUse,
    assignment,
    current_worker,
    default_url,
    display,
    engine_urls,
    planned_url,
)
from chaos.backends.docker.facts import engine_properties
from chaos.backends.docker.images import (
    BuildSettings,
    ImageBuilder,
    node_image_tag,
    stderr_progress,
)
from chaos.backends.docker.images.derived import derive
from chaos.backends.docker.sweep import keep, sweep

if TYPE_CHECKING:
    from chaos.backends.docker import DockerClient as DockerClient

__all__ = [
    "BuildSettings",
    "EngineLost",
    "EnginePool",
    "EngineUse",
    "ImageBuilder",
    "assignment",
    "connect",
    "current_worker",
    "default_url",
    "derive",
    "display",
    "docker_backend",
    "engine_properties",
    "engine_urls",
    "keep",
    "node_image_tag",
    "planned_url",
    "reaper",
    "stderr_progress",
    "sweep",
]
