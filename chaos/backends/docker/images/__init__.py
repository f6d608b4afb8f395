"""Ray node images, built offline: no container registry is assumed.

A node image is the Ray image (``raychaos/ray:<ray>-py<python>``: wheelhouse on the host, a
configured or Debian base, ``--no-index`` install) or one derived from a team's own image
(``raychaos/node:<recipe>``). Images are labelled with a hash of their recipe, so an unchanged
recipe is never rebuilt; an engine that lacks one gets it from another engine of the run before
building it. Every step that can hang is bounded and fails as one :class:`ImageBuildError`.

A team image is derived with :func:`chaos.backends.docker.images.derived.derive`, imported from
its module (tests replace it there).
"""

from chaos.backends.docker.images.base import debian_base_tag
from chaos.backends.docker.images.builder import ImageBuilder
from chaos.backends.docker.images.dockerbuild import DOCKER_BUILD_OPTIONS
from chaos.backends.docker.images.process import run_bounded
from chaos.backends.docker.images.settings import (
    DEBIAN_PYTHON,
    DEFAULT_MIRROR,
    BuildSettings,
    Progress,
    node_image_tag,
    ray_image_tag,
    stderr_progress,
)
from chaos.backends.docker.images.transfer import TRANSFER_TIMEOUT_S, carry, carry_from_donors

__all__ = [
    "DEBIAN_PYTHON",
    "DEFAULT_MIRROR",
    "DOCKER_BUILD_OPTIONS",
    "TRANSFER_TIMEOUT_S",
    "BuildSettings",
    "ImageBuilder",
    "Progress",
    "carry",
    "carry_from_donors",
    "debian_base_tag",
    "node_image_tag",
    "ray_image_tag",
    "run_bounded",
    "stderr_progress",
]
