"""Ray node images, built offline: wheelhouse on the host, Debian base, ``--no-index`` install.

No container registry is assumed. The base image is a configured one when it is present or can
be pulled, otherwise one made from Debian packages (debootstrap → ``docker import``). Images are
tagged ``raychaos/ray:<ray>-py<python>`` and labelled with a hash of the recipe, so an unchanged
recipe is never rebuilt; a file lock makes one build serve every xdist worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.client import call, translated
from chaos.errors import ImageBuildError
from chaos.resources import default_cache_dir, fixtures_path

if TYPE_CHECKING:
    import docker

Progress = Callable[[str], None]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SUITE = "bookworm"
#: Python of Debian bookworm's python3: the only one the debootstrap base can offer.
DEBIAN_PYTHON = "3.11"
_PLATFORMS = {
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"),
    "aarch64": ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"),
}


def ray_image_tag(ray_version: str, python: str) -> str:
    return f"raychaos/ray:{ray_version}-py{python}"


def stderr_progress(line: str) -> None:
    """Progress to the real terminal, even from inside pytest's capture or an xdist worker."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"[raychaos] {line}\n")
    stream.flush()


@dataclass(frozen=True)
class BuildSettings:
    """Where images come from; every field has a flag or environment variable."""

    #: A base image with Python; None (or absent and unpullable) means debootstrap.
    base_image: str | None = None
    debian_mirror: str = DEFAULT_MIRROR
    cache_dir: Path = field(default_factory=default_cache_dir)
    #: pip's index is whatever pip is configured with (PIP_INDEX_URL, pip.conf).
    pip: tuple[str, ...] = (sys.executable, "-m", "pip")


class ImageBuilder:
    """Builds (or finds) the image for a Ray version; safe to call from every xdist worker."""

    def __init__(
        self,
        client: docker.DockerClient,
        settings: BuildSettings | None = None,
        progress: Progress = stderr_progress,
    ) -> None:
        self.client = client
        self.settings = settings or BuildSettings()
        self.progress = progress

    # -- public -------------------------------------------------------------------------
    def ensure(self, ray_version: str, python: str = DEBIAN_PYTHON) -> str:
        """Return the tag of an image with ``ray[default]==ray_version``, building it if needed."""
        tag = ray_image_tag(ray_version, python)
        with self.locked(tag):
            base = self.ensure_base(python)
            recipe = self._recipe_hash(ray_version, python, base)
            if self.current(tag, recipe):
                return tag
            started = time.monotonic()
            self.progress(f"building {tag} (first use of this recipe; later runs reuse it)")
            wheels = self.wheelhouse(ray_version, python)
            self._build(tag, base, wheels, ray_version, python, recipe)
            self.progress(f"built {tag} in {time.monotonic() - started:.0f} s")
            return tag

    @contextlib.contextmanager
    def locked(self, tag: str) -> Iterator[None]:
        """Hold the build lock of ``tag``: one xdist worker builds, the others then reuse it."""
        from filelock import FileLock

        lock_dir = self.settings.cache_dir / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_dir / f"{tag.replace('/', '_').replace(':', '_')}.lock")):
            yield

    def current(self, tag: str, recipe: str) -> bool:
        """Whether ``tag`` exists and was built from ``recipe`` (so it is never rebuilt)."""
        return self._label_of(tag) == recipe

    def docker_build(self, tag: str, recipe: str, **build: Any) -> None:
        """``docker build`` with progress lines and the recipe label; errors name the step."""
        with translated(f"docker build of {tag}"):
            stream = self.client.api.build(
                tag=tag,
                labels={labels.IMAGE_RECIPE: recipe, labels.IMAGE_KIND: "ray"},
                rm=True,
                forcerm=True,
                decode=True,
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
                        self.progress(f"{tag}: {line}")

    def ensure_base(self, python: str = DEBIAN_PYTHON) -> str:
        """The base image tag: the configured one if usable, else a Debian one made offline."""
        configured = self.settings.base_image
        if configured:
            if self.present(configured) or self.pull(configured):
                return configured
            self.progress(f"base image {configured} is neither present nor pullable; using Debian")
        if python != DEBIAN_PYTHON:
            raise ImageBuildError(
                f"no base image with Python {python}: Debian {DEBIAN_SUITE} offers {DEBIAN_PYTHON}",
                hint="pass --raychaos-base-image (or RAYCHAOS_BASE_IMAGE) naming a local image "
                f"with Python {python}, or use python {DEBIAN_PYTHON}",
            )
        return self._debian_base()

    def wheelhouse(self, ray_version: str, python: str) -> Path:
        """``ray[default]==ray_version`` and its dependencies as wheels for the image's platform."""
        arch = self._arch()
        target = self.settings.cache_dir / "wheels" / f"ray-{ray_version}-py{python}-{arch}"
        done = target / ".complete"
        if done.exists():
            return target
        target.mkdir(parents=True, exist_ok=True)
        abi = "cp" + python.replace(".", "")
        cmd = [
            *self.settings.pip,
            "download",
            "--quiet",
            "--dest",
            str(target),
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            python,
            "--abi",
            abi,
            "--abi",
            "abi3",
            "--abi",
            "none",
        ]
        for platform in (*_PLATFORMS[arch], "any"):
            cmd += ["--platform", platform]
        cmd.append(f"ray[default]=={ray_version}")
        self.progress(f"downloading wheels for ray[default]=={ray_version} ({abi}, {arch})")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            seen = " | ".join(tail) or f"pip exited {proc.returncode}"
            if "No matching distribution" in seen or "Could not find a version" in seen:
                raise ImageBuildError(
                    f"no wheels of ray[default]=={ray_version} for {abi} on {arch}: {seen}",
                    hint="pick a version listed by `pip index versions ray` "
                    "(e.g. --raychaos-ray-version 2.60.0)",
                )
            raise ImageBuildError(
                f"pip download of ray[default]=={ray_version} failed: {seen}",
                hint="check that the Python package index is reachable (pip config list)",
            )
        done.write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
        return target

    # -- steps ----------------------------------------------------------------------------
    def _debian_base(self) -> str:
        packages_file = fixtures_path("image", "base-packages.txt")
        packages = [
            line.strip()
            for line in packages_file.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        digest = _digest([DEBIAN_SUITE, self.settings.debian_mirror, *packages])
        tag = f"raychaos/base:{DEBIAN_SUITE}-{digest}"
        if self.present(tag):
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
        self.progress(f"making base image {tag} with debootstrap (about a minute)")
        work = Path(tempfile.mkdtemp(prefix="raychaos-rootfs-", dir=self.settings.cache_dir))
        rootfs = work / "rootfs"
        try:
            proc = subprocess.run(
                [
                    debootstrap,
                    "--variant=minbase",
                    f"--include={','.join(packages)}",
                    DEBIAN_SUITE,
                    str(rootfs),
                    self.settings.debian_mirror,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
                raise ImageBuildError(
                    f"debootstrap {DEBIAN_SUITE} failed (exit {proc.returncode}): {tail}",
                    hint=f"check that {self.settings.debian_mirror} is reachable, or set "
                    "RAYCHAOS_DEBIAN_MIRROR",
                )
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            archive = work / "rootfs.tar"
            subprocess.run(
                ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                check=True,
            )
            repo, _, version = tag.partition(":")
            with translated(f"docker import of {tag}"):
                self.client.api.import_image_from_file(
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
            shutil.rmtree(work, ignore_errors=True)
        return tag

    def _build(
        self, tag: str, base: str, wheels: Path, ray_version: str, python: str, recipe: str
    ) -> None:
        context = Path(tempfile.mkdtemp(prefix="raychaos-build-", dir=self.settings.cache_dir))
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
            self.progress(f"docker build {tag} from {base}")
            self.docker_build(
                tag,
                recipe,
                path=str(context),
                buildargs={"BASE": base, "RAY_VERSION": ray_version, "PYTHON": python},
            )
        finally:
            shutil.rmtree(context, ignore_errors=True)
            self._prune_build_stages()

    # -- helpers --------------------------------------------------------------------------
    def _recipe_hash(self, ray_version: str, python: str, base: str) -> str:
        base_id = call("inspect base image", lambda: self.client.images.get(base).id)
        parts = [ray_version, python, str(base_id)]
        for item in sorted(fixtures_path("image").iterdir()):
            parts.append(item.name + ":" + hashlib.sha256(item.read_bytes()).hexdigest())
        return _digest(parts)

    def _label_of(self, tag: str) -> str | None:
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

    def _arch(self) -> str:
        arch = str(call("docker info", lambda: self.client.info()).get("Architecture", "x86_64"))
        if arch not in _PLATFORMS:
            raise ImageBuildError(
                f"unsupported Docker engine architecture {arch!r}",
                hint=f"raychaos builds wheels for {', '.join(_PLATFORMS)}",
            )
        return arch

    def _prune_build_stages(self) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):  # a leftover costs disk only
            self.client.images.prune(
                filters={"dangling": True, "label": f"{labels.IMAGE_KIND}=build-stage"}
            )


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
