"""``docker build`` through the API, bounded, with progress lines and errors that name the step.

Shared by every image raychaos builds (the Ray image, a team image's derived node image, a
patched-Python image): one place decides the build options, the bound and how a failure reads.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.client import translated
from chaos.backends.docker.images.settings import Progress
from chaos.errors import ImageBuildError

if TYPE_CHECKING:
    import docker

#: `docker build` of the Ray image: a --no-index pip install of the wheelhouse and two layer
#: commits (~1.5 min here).
DOCKER_BUILD_TIMEOUT_S = 900.0

#: Every ``docker build``: intermediate containers removed even on failure, and no network —
#: builds are offline (wheels in the context), so no dependence on the default bridge (docker0).
DOCKER_BUILD_OPTIONS: Mapping[str, Any] = {
    "rm": True,
    "forcerm": True,
    "decode": True,
    "network_mode": "none",
}


def docker_build(
    client: docker.DockerClient,
    tag: str,
    recipe: str,
    progress: Progress,
    *,
    label: bool = True,
    **build: Any,
) -> None:
    """``docker build`` with progress lines and the recipe label (``label=False``: the
    Dockerfile sets it in one instruction); errors name the step."""
    deadline = time.monotonic() + DOCKER_BUILD_TIMEOUT_S
    with translated(f"docker build of {tag}"), _read_timeout_as_build_error(tag):
        stream = client.api.build(
            tag=tag,
            labels={labels.IMAGE_RECIPE: recipe, labels.IMAGE_KIND: "ray"} if label else None,
            **DOCKER_BUILD_OPTIONS,
            **build,
        )
        log: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise ImageBuildError(
                    f"docker build of {tag} failed: {chunk['error'].strip()}",
                    hint="last build lines: " + " | ".join(log[-5:]),
                )
            line = str(chunk.get("stream", "")).strip()
            if line:
                log.append(line)
                if line.startswith("Step "):
                    progress(f"{tag}: {line}")
            if time.monotonic() > deadline:
                raise ImageBuildError(
                    f"docker build of {tag} did not finish within "
                    f"{DOCKER_BUILD_TIMEOUT_S:.0f} s (DOCKER_BUILD_TIMEOUT_S)",
                    hint="check the daemon (`docker info`, its log) and free disk; last "
                    "build lines: " + " | ".join(log[-5:]),
                )


def prune_build_stages(client: docker.DockerClient) -> None:
    """Remove the dangling stages of multi-stage builds (labelled ``build-stage``)."""
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):  # a leftover costs disk only
        client.images.prune(filters={"dangling": True, "label": f"{labels.IMAGE_KIND}=build-stage"})


@contextlib.contextmanager
def _read_timeout_as_build_error(tag: str) -> Iterator[None]:
    """The daemon sent nothing for the client's read timeout during a build: say so."""
    import requests

    try:
        yield
    except requests.exceptions.Timeout as exc:
        raise ImageBuildError(
            f"docker build of {tag}: the daemon sent nothing for longer than the client's "
            f"read timeout ({exc.__class__.__name__})",
            hint="check the daemon (`docker info`, its log) and run again",
        ) from exc
