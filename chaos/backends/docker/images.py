"""Ray node images, built offline: wheelhouse on the host, Debian base, ``--no-index`` install.

No container registry is assumed. The base image is a configured one when it is present or can
be pulled, otherwise one made from Debian packages (debootstrap → ``docker import``). Images are
tagged ``raychaos/ray:<ray>-py<python>`` and labelled with a hash of the recipe, so an unchanged
recipe is never rebuilt; a file lock makes one build serve every xdist worker.

Several engines (:mod:`chaos.backends.docker.engines`): an engine that lacks an image gets it
from another engine of the run that has it, current, by ``docker save`` / ``docker load``
through the API (:func:`carry`, the base image along with it, so the recipe hash — which
includes the base image's id — is the same on both), and the loaded image's ``raychaos.recipe``
label is checked; only when no engine has it is it built. No registry either way.

Every step that can hang is bounded (``pip download``, ``debootstrap``, ``tar``, ``docker
build``, and the wait for another process's build lock): a hang becomes one
:class:`ImageBuildError` naming the step, its bound and what to try, never a silent stall of
every worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.client import call, translated
from chaos.errors import ChaosError, ImageBuildError
from chaos.resources import default_cache_dir, fixtures_path
from chaos.spec import releases

if TYPE_CHECKING:
    import docker

Progress = Callable[[str], None]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Environment variable naming the Debian mirror debootstrap downloads from.
MIRROR_ENV = "RAYCHAOS_DEBIAN_MIRROR"
DEBIAN_SUITE = "bookworm"
#: Python of Debian bookworm's python3: the only one the debootstrap base can offer.
DEBIAN_PYTHON = "3.11"
_PLATFORMS = releases.PLATFORMS


# Bounds of the steps that can hang. Measured here (fast link, 2 cores): debootstrap and
# `docker import` of the base ~1.5 min, `pip download` of the 108 MB wheelhouse plus the
# `docker build` ~1.5 min. Each bound is several times what a slow but working network needs,
# so only a real hang (a stalled mirror or index, a wedged daemon) reaches it.
#: `pip download` of ray[default] (~108 MB, ~60 wheels): ~7 min at 256 KB/s. pip's own
#: socket timeout (15 s, 5 retries) covers a dead connection, not a trickling or hung one.
PIP_DOWNLOAD_TIMEOUT_S = 900.0
#: debootstrap --variant=minbase plus base-packages.txt (177 MB installed, well under 100 MB of
#: .debs, then dpkg): under 7 min of download at 256 KB/s, plus minutes of dpkg on a slow disk.
DEBOOTSTRAP_TIMEOUT_S = 1200.0
#: tar of the debootstrap tree (~180 MB) on the local disk: seconds; a minute on a loaded one.
TAR_TIMEOUT_S = 300.0
#: `docker build` of the Ray image: a --no-index pip install of the wheelhouse and two layer
#: commits (~1.5 min here).
DOCKER_BUILD_TIMEOUT_S = 900.0
#: Carrying an image from one engine to another (``docker save`` streamed into ``docker
#: load`` through this host): the Ray image and its base are ~1.5 GB, 30 min is ~1 MB/s.
TRANSFER_TIMEOUT_S = 1800.0
#: The longest a process waits for another's build lock: the longest build it may wait for
#: (a transfer that fails, then base image, wheelhouse, docker build, one after the other) plus
#: 5 min for `docker import` and the daemon's slack. A holder that hangs longer is hung: its
#: own bounds have expired.
LOCK_WAIT_S = (
    TRANSFER_TIMEOUT_S
    + DEBOOTSTRAP_TIMEOUT_S
    + TAR_TIMEOUT_S
    + PIP_DOWNLOAD_TIMEOUT_S
    + DOCKER_BUILD_TIMEOUT_S
    + 300.0
)
#: After a step's process group is killed, how long its output pipes may stay open (a
#: process that left the group — a daemon started in the chroot — can hold them forever).
KILLED_OUTPUT_WAIT_S = 10.0
#: Connecting to an engine for a transfer (it answered a moment ago).
CONNECT_TIMEOUT_S = 30.0
#: Bytes per read of a transfer, and how often (bytes) it reports progress.
TRANSFER_CHUNK = 1 << 20
TRANSFER_REPORT_EVERY = 256 << 20


def debian_mirror_from_env() -> str:
    """``RAYCHAOS_DEBIAN_MIRROR`` if set (and not blank), else deb.debian.org."""
    return os.environ.get(MIRROR_ENV, "").strip() or DEFAULT_MIRROR


#: Every ``docker build``: intermediate containers removed even on failure, and no network —
#: builds are offline (wheels in the context), so no dependence on the default bridge (docker0).
DOCKER_BUILD_OPTIONS: Mapping[str, Any] = {
    "rm": True,
    "forcerm": True,
    "decode": True,
    "network_mode": "none",
}


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
    #: debootstrap's mirror: ``RAYCHAOS_DEBIAN_MIRROR``, else deb.debian.org.
    debian_mirror: str = field(default_factory=debian_mirror_from_env)
    cache_dir: Path = field(default_factory=default_cache_dir)
    #: pip's index is whatever pip is configured with (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
    #: pip.conf): `pip download` gets no index option and inherits the environment.
    pip: tuple[str, ...] = (sys.executable, "-m", "pip")
    #: Versions built from a wheel file instead of the index (``--raychaos-ray-wheel``); by
    #: default the wheels this process was given (:func:`chaos.spec.releases.provided`).
    wheels: Mapping[str, releases.RayWheel] = field(default_factory=releases.provided)


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

    # -- public -------------------------------------------------------------------------
    def ensure(self, ray_version: str, python: str = DEBIAN_PYTHON) -> str:
        """Return the tag of an image with ``ray[default]==ray_version``, building it if needed
        (from the wheel of :attr:`BuildSettings.wheels` when one provides that version)."""
        tag = node_image_tag(ray_version, python, self.settings.wheels)
        with self.locked(tag):
            if self.donors is not None:
                carry_from_donors(self, tag, ray_version, python)
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
        """Hold the build lock of ``tag``: one xdist worker builds, the others then reuse it.

        The wait is bounded by :data:`LOCK_WAIT_S`; the OS drops the lock when its holder dies,
        so only a live but hung holder can make it expire.
        """
        from filelock import FileLock, Timeout

        lock_dir = self.settings.cache_dir / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        path = lock_dir / f"{tag.replace('/', '_').replace(':', '_')}.lock"
        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            self.progress(
                f"waiting for another process checking or building {tag} (≤ {LOCK_WAIT_S:.0f} s)"
            )
            try:
                lock.acquire(timeout=LOCK_WAIT_S)
            except Timeout:
                raise ImageBuildError(
                    f"build lock of {tag}: another process held it for more than "
                    f"{LOCK_WAIT_S:.0f} s (longer than any bounded build step may take)",
                    hint=f"find the holder with `fuser -v {path}` and stop it if it is hung, "
                    "then run again (`raychaos image build` builds without a test run)",
                ) from None
        try:
            yield
        finally:
            lock.release()

    def current(self, tag: str, recipe: str) -> bool:
        """Whether ``tag`` exists and was built from ``recipe`` (so it is never rebuilt)."""
        return self._label_of(tag) == recipe

    def docker_build(
        self,
        tag: str,
        recipe: str,
        *,
        label: bool = True,
        **build: Any,
    ) -> None:
        """``docker build`` with progress lines and the recipe label (``label=False``: the
        Dockerfile sets it in one instruction); errors name the step."""
        deadline = time.monotonic() + DOCKER_BUILD_TIMEOUT_S
        with translated(f"docker build of {tag}"), _read_timeout_as_build_error(tag):
            stream = self.client.api.build(
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
                        self.progress(f"{tag}: {line}")
                if time.monotonic() > deadline:
                    raise ImageBuildError(
                        f"docker build of {tag} did not finish within "
                        f"{DOCKER_BUILD_TIMEOUT_S:.0f} s (DOCKER_BUILD_TIMEOUT_S)",
                        hint="check the daemon (`docker info`, its log) and free disk; last "
                        "build lines: " + " | ".join(log[-5:]),
                    )

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
        """``ray[default]==ray_version`` and its dependencies as wheels for the image's platform
        (Ray itself from the wheel of :attr:`BuildSettings.wheels` providing that version)."""
        arch = self._arch()
        wheel = self.settings.wheels.get(ray_version)
        target = (
            self.settings.cache_dir / "wheels" / wheelhouse_name(ray_version, python, arch, wheel)
        )
        done = target / ".complete"
        if done.exists():
            return target
        target.mkdir(parents=True, exist_ok=True)
        abi = "cp" + python.replace(".", "")
        # A wheel's own dependencies come from the configured index, as a release's do.
        wanted = f"{wheel.path}[default]" if wheel else f"ray[default]=={ray_version}"
        cmd = [*self.settings.pip, *pip_download_args(target, python, arch), wanted]
        self.progress(f"downloading wheels for ray[default]=={ray_version} ({abi}, {arch})")
        proc = run_bounded(
            cmd,
            step=f"pip download of ray[default]=={ray_version}",
            bound_s=PIP_DOWNLOAD_TIMEOUT_S,
            bound_name="PIP_DOWNLOAD_TIMEOUT_S",
            hint="check that the Python package index answers (`pip config list`, "
            "PIP_INDEX_URL); wheels already downloaded are kept for the next try",
        )
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
        packages = base_packages()
        tag = debian_base_tag()
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
        with self.locked(tag):  # Redis asks for the base outside any Ray image's lock
            if self.present(tag):
                return tag
            self.progress(f"making base image {tag} with debootstrap (about a minute)")
            work = Path(tempfile.mkdtemp(prefix="raychaos-rootfs-", dir=self.settings.cache_dir))
            try:
                archive = debootstrap_archive(
                    debootstrap, packages, work, self.settings.debian_mirror
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
                # A killed debootstrap can leave proc, sys or dev mounted in the tree: unmount
                # them before removing it, so the removal never reaches outside the tree.
                _unmount_below(work)
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
        if (wheel := self.settings.wheels.get(ray_version)) is not None:
            parts.append(f"wheel:{wheel.sha256}")
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


def wheelhouse_name(
    ray_version: str, python: str, arch: str, wheel: releases.RayWheel | None
) -> str:
    """The wheelhouse directory of a release, or of a wheel of the user's (named by its hash)."""
    if wheel is not None and arch not in wheel.arches:
        raise ImageBuildError(
            f"{wheel.path.name} is for {', '.join(wheel.arches)}; this engine runs {arch}",
            hint="pass a wheel for the engine's architecture, or another engine",
        )
    name = f"{ray_version}-wheel-{wheel.short}" if wheel else ray_version
    return f"ray-{name}-py{python}-{arch}"


def pip_download_args(target: Path, python: str, arch: str) -> list[str]:
    """``pip download`` into ``target`` of binary wheels for the image (CPython ``python`` on
    ``arch``). No index option: pip's own configuration says where from."""
    abi = "cp" + python.replace(".", "")
    args = ["download", "--quiet", "--dest", str(target), "--only-binary=:all:"]
    args += ["--implementation", "cp", "--python-version", python]
    args += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in (*_PLATFORMS[arch], "any"):
        args += ["--platform", platform]
    return args


def carry_from_donors(builder: ImageBuilder, tag: str, ray_version: str, python: str) -> bool:
    """Load ``tag`` (Ray ``ray_version`` on ``python``) and its base into ``builder``'s engine
    from another engine of the run that has both, current, unless this engine has it current
    already; True when carried.

    The base comes along so that it has the same id here, hence the same recipe hash; the
    loaded image's ``raychaos.recipe`` label is checked against the hash computed here. A
    donor that does not answer, or a transfer that fails, means a build instead.
    """
    here = present_base(builder, python)
    if here is not None and builder.current(tag, builder._recipe_hash(ray_version, python, here)):
        return False
    for donor in builder.donors() if builder.donors is not None else ():
        try:
            base = present_base(donor, python)
            if base is None:
                continue
            recipe = donor._recipe_hash(ray_version, python, base)
            if not donor.current(tag, recipe):
                continue
        except ChaosError as exc:
            builder.progress(f"{donor.engine or 'an engine'} cannot give {tag}: {exc.message}")
            continue
        where = f" from {donor.engine} to {builder.engine}" if builder.engine else ""
        builder.progress(f"carrying {tag} and {base}{where} (docker save | docker load)")
        try:
            size, took = carry(donor.client, builder.client, [base, tag], builder.progress)
        except ChaosError as exc:
            builder.progress(f"carrying {tag} failed ({exc.message}); building it instead")
            return False
        loaded = builder._label_of(tag)
        expected = builder._recipe_hash(ray_version, python, base)
        if loaded != recipe or expected != recipe:
            builder.progress(
                f"carried {tag} has recipe {loaded}, expected {expected}: building it here"
            )
            return False
        builder.progress(
            f"carried {tag}{where}: {size / 2**30:.2f} GiB in {took:.0f} s, "
            f"{labels.IMAGE_RECIPE}={recipe} checked"
        )
        return True
    return False


def present_base(builder: ImageBuilder, python: str = DEBIAN_PYTHON) -> str | None:
    """The base image :meth:`ImageBuilder.ensure_base` would use, if it is on ``builder``'s
    engine already (None: it would pull or make one)."""
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
    digest = _digest([DEBIAN_SUITE, DEFAULT_MIRROR, *base_packages()])
    return f"raychaos/base:{DEBIAN_SUITE}-{digest}"


def carry(
    source: docker.DockerClient,
    target: docker.DockerClient,
    refs: Sequence[str],
    progress: Progress = stderr_progress,
    bound_s: float = TRANSFER_TIMEOUT_S,
) -> tuple[int, float]:
    """``docker save refs`` on ``source`` streamed into ``docker load`` on ``target`` through
    this host (no file, no registry); returns (bytes carried, seconds).

    One archive for all ``refs``: layers they share travel once. Image ids are content
    addresses, so every loaded image has the id (and the labels) it had on ``source``. Bounded
    by ``bound_s`` overall; a failure is one :class:`ImageBuildError` naming both ends.
    """
    import docker.errors
    import requests

    started = time.monotonic()
    deadline = started + bound_s
    sent = 0
    what = f"carrying {', '.join(refs)}"

    def chunks(response: Any) -> Iterator[bytes]:
        nonlocal sent
        reported = 0
        for chunk in response.iter_content(TRANSFER_CHUNK, False):
            sent += len(chunk)
            if sent - reported >= TRANSFER_REPORT_EVERY:
                reported = sent
                progress(f"{what}: {sent / 2**30:.2f} GiB in {time.monotonic() - started:.0f} s")
            if time.monotonic() > deadline:
                raise ImageBuildError(
                    f"{what} did not finish within {bound_s:.0f} s (TRANSFER_TIMEOUT_S) after "
                    f"{sent / 2**20:.0f} MiB",
                    hint="check the link between this host and both engines, or build the image "
                    "on the slow engine (`DOCKER_HOST=… raychaos image build`)",
                )
            yield chunk

    # docker-py's request helpers take a per-call timeout; its public methods do not.
    save_api: Any = source.api
    load_api: Any = target.api
    try:
        # docker-py's get_image() names one image; the API's /images/get takes several.
        # The engine exports every layer before the first byte: the read timeout is the bound.
        saved = save_api._get(
            save_api._url("/images/get"),
            params={"names": list(refs)},
            stream=True,
            timeout=(CONNECT_TIMEOUT_S, bound_s),
        )
        save_api._raise_for_status(saved)
        try:
            loaded = load_api._post(
                load_api._url("/images/load"),
                data=chunks(saved),
                params={"quiet": "1"},
                stream=True,
                timeout=(CONNECT_TIMEOUT_S, bound_s),
            )
            load_api._raise_for_status(loaded)
            for line in load_api._stream_helper(loaded, decode=True):
                if isinstance(line, dict) and line.get("error"):
                    raise ImageBuildError(f"{what}: docker load said {line['error']}")
        finally:
            saved.close()
    except docker.errors.APIError as exc:
        raise ImageBuildError(
            f"{what} failed: {exc.explanation or exc}",
            hint="check free disk on the receiving engine (`docker system df`)",
        ) from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise ImageBuildError(
            f"{what} failed after {sent / 2**20:.0f} MiB: {str(exc).splitlines()[0][:300]}",
            hint="check that both engines still answer (`docker -H URL info`)",
        ) from exc
    return sent, time.monotonic() - started


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
    _unmount_below(rootfs)
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


def run_bounded(
    argv: list[str], *, step: str, bound_s: float, bound_name: str, hint: str
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (output captured) for at most ``bound_s``; past it, kill its whole process
    group (debootstrap's wget and dpkg, pip's children) and raise one :class:`ImageBuildError`
    naming the step, the bound and ``hint``."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kill below reaches every child
    )
    try:
        out, err = proc.communicate(timeout=bound_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        tail = _output_after_kill(proc)
        raise ImageBuildError(
            f"{step} did not finish within {bound_s:.0f} s ({bound_name}); killed "
            f"`{shlex.join(argv[:3])} …`" + (f"; last output: {tail}" if tail else ""),
            hint=hint,
        ) from None
    finally:
        if proc.returncode is None:  # interrupted (Ctrl-C): the step does not outlive us
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _output_after_kill(proc: subprocess.Popen[str]) -> str:
    """The last lines a killed step printed, read for at most :data:`KILLED_OUTPUT_WAIT_S`: a
    process outside its group (``setsid``) may hold its pipes open; then say so instead."""
    try:
        out, err = proc.communicate(timeout=KILLED_OUTPUT_WAIT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        return (
            f"(its output stayed open {KILLED_OUTPUT_WAIT_S:.0f} s after the kill: a process "
            "that left its process group still holds it)"
        )
    return " | ".join((out + err).strip().splitlines()[-3:])


def _unmount_below(root: Path) -> None:
    """Lazily unmount every mount at or below ``root`` (deepest first); no-op when none."""
    prefix = str(root.resolve())
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [
        line.split()[1].replace("\\040", " ")
        for line in mounts
        if len(line.split()) > 1
        and (line.split()[1] == prefix or line.split()[1].startswith(prefix + "/"))
    ]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=60)


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


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
