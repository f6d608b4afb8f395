"""The base image under the Ray image: a configured one, or Debian made offline.

No registry is assumed: a configured base image is used when present or pullable, otherwise
one is made from Debian packages (debootstrap → ``docker import``). Its tag names what is
installed, not where it came from, so a different mirror rebuilds nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from chaos import labels
from chaos.backends.docker.client import translated
from chaos.backends.docker.images.process import run_bounded, unmount_below
from chaos.backends.docker.images.settings import (
    DEBIAN_PYTHON,
    DEBIAN_SUITE,
    DEFAULT_MIRROR,
    MIRROR_ENV,
    digest,
)
from chaos.errors import ImageBuildError
from chaos.resources import fixtures_path

if TYPE_CHECKING:
    from chaos.backends.docker.images.steps import ImageSteps

#: debootstrap --variant=minbase plus base-packages.txt (177 MB installed, well under 100 MB of
#: .debs, then dpkg): under 7 min of download at 256 KB/s, plus minutes of dpkg on a slow disk.
DEBOOTSTRAP_TIMEOUT_S = 1200.0
#: tar of the debootstrap tree (~180 MB) on the local disk: seconds; a minute on a loaded one.
TAR_TIMEOUT_S = 300.0


def ensure_base(builder: ImageSteps, python: str = DEBIAN_PYTHON) -> str:
    """The base image tag: the configured one if usable, else a Debian one made offline."""
    configured = builder.settings.base_image
    if configured:
        if builder.present(configured) or builder.pull(configured):
            return configured
        builder.progress(f"base image {configured} is neither present nor pullable; using Debian")
    if python != DEBIAN_PYTHON:
        raise ImageBuildError(
            f"no base image with Python {python}: Debian {DEBIAN_SUITE} offers {DEBIAN_PYTHON}",
            hint="pass --raychaos-base-image (or RAYCHAOS_BASE_IMAGE) naming a local image "
            f"with Python {python}, or use python {DEBIAN_PYTHON}",
        )
    return _debian_base(builder)


def present_base(builder: ImageSteps, python: str = DEBIAN_PYTHON) -> str | None:
    """The base image :func:`ensure_base` would use, if it is on ``builder``'s engine already
    (None: it would pull or make one)."""
    configured = builder.settings.base_image
    if configured and builder.present(configured):
        return configured
    if python != DEBIAN_PYTHON:
        return None
    tag = debian_base_tag()
    return tag if builder.present(tag) else None


def base_packages() -> list[str]:
    packages_file = fixtures_path("image", "base-packages.txt")
    return [
        line.strip()
        for line in packages_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def debian_base_tag() -> str:
    """The tag of the Debian base image: it names what is installed, not where it came from.

    A mirror serves the same signed packages, so setting RAYCHAOS_DEBIAN_MIRROR rebuilds
    nothing (the default mirror stays in the digest so the tags of earlier builds still match).
    """
    recipe = digest([DEBIAN_SUITE, DEFAULT_MIRROR, *base_packages()])
    return f"raychaos/base:{DEBIAN_SUITE}-{recipe}"


def _debian_base(builder: ImageSteps) -> str:
    packages = base_packages()
    tag = debian_base_tag()
    if builder.present(tag):
        return tag
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageBuildError(
            "no base image: none is configured or pullable, and debootstrap is not installed",
            hint="`apt-get install debootstrap` (the README's install step does it), or pass "
            "--raychaos-base-image with a local Debian-based image that has python3",
        )
    if os.geteuid() != 0:
        raise ImageBuildError(
            "debootstrap needs root to make the Debian base image",
            hint="run the first build as root (`sudo raychaos image build`) or pass "
            "--raychaos-base-image",
        )
    with builder.locked(tag):  # Redis asks for the base outside any Ray image's lock
        if builder.present(tag):
            return tag
        builder.progress(f"making base image {tag} with debootstrap (about a minute)")
        work = Path(tempfile.mkdtemp(prefix="raychaos-rootfs-", dir=builder.settings.cache_dir))
        try:
            archive = debootstrap_archive(
                debootstrap, packages, work, builder.settings.debian_mirror
            )
            repo, _, version = tag.partition(":")
            with translated(f"docker import of {tag}"):
                builder.client.api.import_image_from_file(
                    str(archive),
                    repository=repo,
                    tag=version,
                    changes=[
                        "ENV LANG=C.UTF-8",
                        f"LABEL {labels.IMAGE_KIND}=base",
                        'CMD ["/bin/sh"]',
                    ],
                )
        finally:
            # A killed debootstrap can leave proc, sys or dev mounted in the tree: unmount
            # them before removing it, so the removal never reaches outside the tree.
            unmount_below(work)
            shutil.rmtree(work, ignore_errors=True)
    return tag


def debootstrap_archive(debootstrap: str, packages: list[str], work: Path, mirror: str) -> Path:
    """A tar of a Debian minbase tree with ``packages``, made in ``work`` (bounded steps)."""
    rootfs = work / "rootfs"
    proc = run_bounded(
        [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(packages)}",
            DEBIAN_SUITE,
            str(rootfs),
            mirror,
        ],
        step=f"debootstrap {DEBIAN_SUITE} from {mirror}",
        bound_s=DEBOOTSTRAP_TIMEOUT_S,
        bound_name="DEBOOTSTRAP_TIMEOUT_S",
        hint=f"check that {mirror} answers, or set {MIRROR_ENV} to a nearer mirror, or pass "
        "--raychaos-base-image",
    )
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        raise ImageBuildError(
            f"debootstrap {DEBIAN_SUITE} failed (exit {proc.returncode}): {tail}",
            hint=f"check that {mirror} is reachable, or set {MIRROR_ENV}",
        )
    unmount_below(rootfs)
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
    archive = work / "rootfs.tar"
    tar = run_bounded(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
        step=f"tar of the {DEBIAN_SUITE} root file system",
        bound_s=TAR_TIMEOUT_S,
        bound_name="TAR_TIMEOUT_S",
        hint=f"check the free disk of {work.parent} (`df -h`)",
    )
    if tar.returncode != 0:
        raise ImageBuildError(
            f"tar of the {DEBIAN_SUITE} root file system failed: {tar.stderr.strip()[-300:]}",
            hint=f"check the free disk of {work.parent} (`df -h`)",
        )
    return archive
