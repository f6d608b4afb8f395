"""What an image build is given, and the names it gives images.

The tags and the digest below are the image cache's keys: an image whose tag and recipe label
match is never rebuilt, so changing how they are spelled or hashed makes every user rebuild.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from chaos import console
from chaos.resources import default_cache_dir
from chaos.spec import releases

Progress = Callable[[str], None]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Environment variable naming the Debian mirror debootstrap downloads from.
MIRROR_ENV = "RAYCHAOS_DEBIAN_MIRROR"
DEBIAN_SUITE = "bookworm"
#: Python of Debian bookworm's python3: the only one the debootstrap base can offer.
DEBIAN_PYTHON = "3.11"


def debian_mirror_from_env() -> str:
    """``RAYCHAOS_DEBIAN_MIRROR`` if set (and not blank), else deb.debian.org."""
    return os.environ.get(MIRROR_ENV, "").strip() or DEFAULT_MIRROR


#: Progress to the real terminal, even from inside pytest's capture or an xdist worker.
stderr_progress = console.progress


@dataclass(frozen=True)
class BuildSettings:
    """Where images come from; every field has a flag or environment variable."""

    #: A base image with Python; None (or absent and unpullable) means debootstrap.
    base_image: str | None = None
    #: debootstrap's mirror: ``RAYCHAOS_DEBIAN_MIRROR``, else deb.debian.org.
    debian_mirror: str = field(default_factory=debian_mirror_from_env)
    cache_dir: Path = field(default_factory=default_cache_dir)
    #: pip's index is whatever pip is configured with (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
    #: pip.conf): `pip download` gets no index option and inherits the environment.
    pip: tuple[str, ...] = (sys.executable, "-m", "pip")
    #: Versions built from a wheel file instead of the index (``--raychaos-ray-wheel``); by
    #: default the wheels this process was given (:func:`chaos.spec.releases.provided`).
    wheels: Mapping[str, releases.RayWheel] = field(default_factory=releases.provided)


def ray_image_tag(ray_version: str, python: str) -> str:
    # A tag has no '+': a local version (2.60.0+mycorp.1) is spelled 2.60.0_mycorp.1.
    return f"raychaos/ray:{ray_version.replace('+', '_')}-py{python}"


def node_image_tag(
    ray_version: str, python: str, wheels: Mapping[str, releases.RayWheel] | None = None
) -> str:
    """The tag :meth:`ImageBuilder.ensure` gives Ray ``ray_version``: the release's, or for a
    version built from a wheel of the user's (``wheels``; default: this process's) one naming
    the wheel's hash, so it is never taken for the official release."""
    wheel = (releases.provided() if wheels is None else wheels).get(ray_version)
    if wheel is None:
        return ray_image_tag(ray_version, python)
    return ray_image_tag(f"{wheel.version}-wheel-{wheel.short}", python)


def digest(parts: list[str]) -> str:
    """The 12 hex digits of a recipe: its parts, one per line, hashed."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def file_digests(files: list[Path]) -> list[str]:
    """``name:sha256`` of each file, the recipe parts that make an edited fixture rebuild."""
    return [item.name + ":" + hashlib.sha256(item.read_bytes()).hexdigest() for item in files]
