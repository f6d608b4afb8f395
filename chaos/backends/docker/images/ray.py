"""The Ray image: the base image plus the wheelhouse, installed ``--no-index`` by the recipe.

The recipe is ``fixtures/image/`` (Dockerfile, node entry, base packages). Its hash — with the
Ray version, the Python, the base image's id and a user's wheel — labels the image, so an
unchanged recipe is never rebuilt and an edited one always is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.backends.docker.images.dockerbuild import prune_build_stages
from chaos.backends.docker.images.settings import digest, file_digests
from chaos.resources import fixtures_path
from chaos.spec import releases

if TYPE_CHECKING:
    from chaos.backends.docker.images.steps import ImageSteps


def ray_recipe(ray_version: str, python: str, base_id: str, wheel: releases.RayWheel | None) -> str:
    """The recipe hash of the Ray image (its ``raychaos.recipe`` label)."""
    parts = [ray_version, python, base_id]
    if wheel is not None:
        parts.append(f"wheel:{wheel.sha256}")
    return digest([*parts, *file_digests(sorted(fixtures_path("image").iterdir()))])


def build_ray_image(
    builder: ImageSteps,
    tag: str,
    base: str,
    wheels: Path,
    ray_version: str,
    python: str,
    recipe: str,
) -> None:
    """``docker build`` of ``tag`` from ``base`` with the wheelhouse ``wheels`` in the context."""
    context = Path(tempfile.mkdtemp(prefix="raychaos-build-", dir=builder.settings.cache_dir))
    try:
        for item in fixtures_path("image").iterdir():
            shutil.copy2(item, context / item.name)
        # Hard links keep the 100+ MB wheelhouse out of a second copy on disk.
        (context / "wheels").mkdir()
        for wheel in wheels.glob("*.whl"):
            try:
                os.link(wheel, context / "wheels" / wheel.name)
            except OSError:
                shutil.copy2(wheel, context / "wheels" / wheel.name)
        builder.progress(f"docker build {tag} from {base}")
        builder.docker_build(
            tag,
            recipe,
            path=str(context),
            buildargs={"BASE": base, "RAY_VERSION": ray_version, "PYTHON": python},
        )
    finally:
        shutil.rmtree(context, ignore_errors=True)
        prune_build_stages(builder.client)
