"""What an image step (base image, Ray image, derived image, carrying between engines) may ask
of the builder that runs it: a narrow protocol, so the steps never import the builder back.

:class:`chaos.backends.docker.images.builder.ImageBuilder` satisfies it structurally; a step
takes ``ImageSteps`` and sees only these engine primitives, the build settings and progress.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from chaos.backends.docker.images.settings import BuildSettings, Progress

if TYPE_CHECKING:
    import docker


class ImageSteps(Protocol):
    """The builder as an image step sees it."""

    # Read-only here (properties), so the builder's own, narrower types satisfy them.
    @property
    def client(self) -> docker.DockerClient: ...

    @property
    def settings(self) -> BuildSettings: ...

    @property
    def progress(self) -> Progress: ...

    @property
    def engine(self) -> str:
        """The engine's name in progress lines ("" for the one engine of DOCKER_HOST)."""
        ...

    @property
    def donors(self) -> Callable[[], Sequence[ImageSteps]] | None:
        """The builders of the run's other engines, to carry images from (None: this one)."""
        ...

    def locked(self, tag: str) -> AbstractContextManager[None]: ...

    def docker_build(self, tag: str, recipe: str, *, label: bool = True, **build: Any) -> None: ...

    def recipe_hash(self, ray_version: str, python: str, base_image: str) -> str: ...

    def current(self, tag: str, recipe: str) -> bool: ...

    def recipe_label(self, tag: str) -> str | None: ...

    def present(self, ref: str) -> bool: ...

    def pull(self, ref: str) -> bool: ...
