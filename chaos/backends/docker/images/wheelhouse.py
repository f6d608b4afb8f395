"""The wheelhouse: ``ray[default,serve]`` and its dependencies as wheels, downloaded on the host.

Images are built offline (``pip install --no-index`` from the build context), so the wheels
are fetched here, once per release, Python and architecture, with whatever index pip is
configured with; a finished wheelhouse is marked complete and reused by every later build.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.backends.docker.client import call
from chaos.backends.docker.images.process import run_bounded
from chaos.backends.docker.images.settings import BuildSettings, Progress
from chaos.errors import ImageBuildError
from chaos.spec import releases

if TYPE_CHECKING:
    import docker

PLATFORMS = releases.PLATFORMS

#: The extras every node image installs: the dashboard and agents (``default``), and Ray Serve's
#: own dependencies (``serve``: fastapi, starlette, uvicorn, watchfiles, requests), without which
#: ``import ray.serve`` fails. Serve's replicas and proxies run on every node, so every image
#: carries them. The Dockerfile installs the same extras (``fixtures/image/Dockerfile``).
EXTRAS = "default,serve"
#: `pip download` of ray[default,serve] (~120 MB, ~75 wheels): ~8 min at 256 KB/s. pip's own
#: socket timeout (15 s, 5 retries) covers a dead connection, not a trickling or hung one.
PIP_DOWNLOAD_TIMEOUT_S = 900.0


def engine_arch(client: docker.DockerClient) -> str:
    """The engine's architecture, one raychaos has wheel platforms for."""
    arch = str(call("docker info", lambda: client.info()).get("Architecture", "x86_64"))
    if arch not in PLATFORMS:
        raise ImageBuildError(
            f"unsupported Docker engine architecture {arch!r}",
            hint=f"raychaos builds wheels for {', '.join(PLATFORMS)}",
        )
    return arch


def ensure_wheelhouse(
    settings: BuildSettings, arch: str, ray_version: str, python: str, progress: Progress
) -> Path:
    """``ray[default,serve]==ray_version`` and its dependencies as wheels for ``arch`` (Ray itself
    from the wheel of :attr:`BuildSettings.wheels` providing that version)."""
    wheel = settings.wheels.get(ray_version)
    target = settings.cache_dir / "wheels" / wheelhouse_name(ray_version, python, arch, wheel)
    done = target / ".complete"
    if done.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    abi = "cp" + python.replace(".", "")
    # A wheel's own dependencies come from the configured index, as a release's do.
    wanted = f"{wheel.path}[{EXTRAS}]" if wheel else f"ray[{EXTRAS}]=={ray_version}"
    cmd = [*settings.pip, *pip_download_args(target, python, arch), wanted]
    progress(f"downloading wheels for ray[{EXTRAS}]=={ray_version} ({abi}, {arch})")
    proc = run_bounded(
        cmd,
        step=f"pip download of ray[{EXTRAS}]=={ray_version}",
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
                f"no wheels of ray[{EXTRAS}]=={ray_version} for {abi} on {arch}: {seen}",
                hint="pick a version listed by `pip index versions ray` "
                "(e.g. --raychaos-ray-version 2.60.0)",
            )
        raise ImageBuildError(
            f"pip download of ray[{EXTRAS}]=={ray_version} failed: {seen}",
            hint="check that the Python package index is reachable (pip config list)",
        )
    done.write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    return target


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
    # The extras are part of the name: a wheelhouse of ray[default] alone (raychaos before
    # Serve) is complete for its own extras, never reused for these.
    return f"ray-{name}-{EXTRAS.replace(',', '-')}-py{python}-{arch}"


def pip_download_args(target: Path, python: str, arch: str) -> list[str]:
    """``pip download`` into ``target`` of binary wheels for the image (CPython ``python`` on
    ``arch``). No index option: pip's own configuration says where from."""
    abi = "cp" + python.replace(".", "")
    args = ["download", "--quiet", "--dest", str(target), "--only-binary=:all:"]
    args += ["--implementation", "cp", "--python-version", python]
    args += ["--abi", abi, "--abi", "abi3", "--abi", "none"]
    for platform in (*PLATFORMS[arch], "any"):
        args += ["--platform", platform]
    return args
