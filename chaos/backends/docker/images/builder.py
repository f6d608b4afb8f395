"""The image builder: finds, carries or builds the node image for a Ray version.

It orchestrates the steps of the modules beside it (base image, wheelhouse, Ray image, carrying
between engines) under one build lock per tag, and offers the few engine primitives they share
(present, pull, the recipe label). An unchanged recipe is never rebuilt, and one build serves
every xdist worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.client import call
from chaos.backends.docker.images.base import ensure_base
from chaos.backends.docker.images.dockerbuild import docker_build
from chaos.backends.docker.images.lock import build_lock
from chaos.backends.docker.images.ray import build_ray_image, ray_recipe
from chaos.backends.docker.images.settings import (
    DEBIAN_PYTHON,
    BuildSettings,
    Progress,
    node_image_tag,
    stderr_progress,
)
from chaos.backends.docker.images.transfer import carry_from_donors
from chaos.backends.docker.images.wheelhouse import engine_arch, ensure_wheelhouse

if TYPE_CHECKING:
    import docker


class ImageBuilder:
    """Builds (or finds) the image for a Ray version; safe to call from every xdist worker."""

    def __init__(
        self,
        client: docker.DockerClient,
        settings: BuildSettings | None = None,
        progress: Progress = stderr_progress,
        *,
        engine: str = "",
        donors: Callable[[], Sequence[ImageBuilder]] | None = None,
    ) -> None:
        self.client = client
        self.settings = settings or BuildSettings()
        self.progress = progress
        #: The engine's name in progress lines ("" for the one engine of DOCKER_HOST).
        self.engine = engine
        #: Builders of the run's other engines: images are carried from them before a build.
        self.donors = donors

    def ensure(self, ray_version: str, python: str = DEBIAN_PYTHON) -> str:
        """Return the tag of an image with ``ray[default,serve]==ray_version``, building it if
        needed (from the wheel of :attr:`BuildSettings.wheels` when one provides that version)."""
        tag = node_image_tag(ray_version, python, self.settings.wheels)
        with self.locked(tag):
            if self.donors is not None:
                carry_from_donors(self, tag, ray_version, python)
            base_image = self.ensure_base(python)
            recipe = self.recipe_hash(ray_version, python, base_image)
            if self.current(tag, recipe):
                return tag
            started = time.monotonic()
            self.progress(f"building {tag} (first use of this recipe; later runs reuse it)")
            wheels = self.wheelhouse(ray_version, python)
            build_ray_image(self, tag, base_image, wheels, ray_version, python, recipe)
            self.progress(f"built {tag} in {time.monotonic() - started:.0f} s")
            return tag

    @contextlib.contextmanager
    def locked(self, tag: str) -> Iterator[None]:
        """Hold the build lock of ``tag``: one xdist worker builds, the others then reuse it."""
        with build_lock(self.settings.cache_dir, tag, self.progress):
            yield

    def ensure_base(self, python: str = DEBIAN_PYTHON) -> str:
        """The base image tag: the configured one if usable, else a Debian one made offline."""
        return ensure_base(self, python)

    def wheelhouse(self, ray_version: str, python: str) -> Path:
        """``ray[default,serve]==ray_version`` and its dependencies as wheels for the engine."""
        arch = engine_arch(self.client)
        return ensure_wheelhouse(self.settings, arch, ray_version, python, self.progress)

    def docker_build(self, tag: str, recipe: str, *, label: bool = True, **build: Any) -> None:
        """``docker build`` on this engine, bounded, with the recipe label (``label=False``: the
        Dockerfile sets it in one instruction)."""
        docker_build(self.client, tag, recipe, self.progress, label=label, **build)

    def recipe_hash(self, ray_version: str, python: str, base_image: str) -> str:
        """The recipe of the Ray image of ``ray_version`` on ``base_image`` (on this engine)."""
        base_id = call("inspect base image", lambda: self.client.images.get(base_image).id)
        wheel = self.settings.wheels.get(ray_version)
        return ray_recipe(ray_version, python, str(base_id), wheel)

    def current(self, tag: str, recipe: str) -> bool:
        """Whether ``tag`` exists and was built from ``recipe`` (so it is never rebuilt)."""
        return self.recipe_label(tag) == recipe

    def recipe_label(self, tag: str) -> str | None:
        """The ``raychaos.recipe`` label of ``tag``; None when the engine lacks it."""
        import docker.errors

        try:
            image = self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            return None
        return (image.labels or {}).get(labels.IMAGE_RECIPE)

    def present(self, ref: str) -> bool:
        import docker.errors

        try:
            self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            return False
        return True

    def pull(self, ref: str) -> bool:
        import docker.errors

        try:
            self.client.images.pull(ref)
        except docker.errors.DockerException:
            return False
        return True
