"""Images as platform teams build them, for the image-contract tests: NOT raychaos's recipe.

Each is made offline from raychaos's Debian base and the cached Ray wheelhouse, the way a team
would write its own Dockerfile, and carries no ``raychaos.image`` label (so the harness treats
it as a team's image and derives its node image from it):

- ``system``: ``ray[default]`` pip-installed into Debian's system interpreter (``ray`` in
  ``/usr/local/bin``, no venv), default user root;
- ``venv``: a venv at ``/srv/team/env``, default user ``team`` (uid 1234);
- ``conda``: a standalone CPython prefix at ``/opt/conda`` (with ``conda-meta/``, as conda
  lays it out; the interpreter is the host's pyenv build, relocated), Ray pip-installed
  into it; default user root;
- ``no-iptables``: ``system`` without the iptables package.

Built once per recipe (label ``raychaos-test.recipe``), then reused.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from chaos.backends.docker.images import DOCKER_BUILD_OPTIONS, ImageBuilder

RAY = "2.60.0"
RECIPE_LABEL = "raychaos-test.recipe"

_SYSTEM = """
FROM {base}
COPY wheels /wheels
RUN python3 "$(ls /usr/share/python-wheels/pip-*.whl)/pip" install -q --break-system-packages \\
      --no-index --find-links /wheels --no-warn-script-location "ray[default]=={ray}" \\
 && rm -rf /wheels && test -x /usr/local/bin/ray
"""
_VENV = """
FROM {base}
COPY wheels /wheels
RUN python3 -m venv /srv/team/env \\
 && /srv/team/env/bin/pip install -q --no-index --find-links /wheels "ray[default]=={ray}" \\
 && rm -rf /wheels && useradd -m -u 1234 team
ENV PATH=/srv/team/env/bin:/usr/local/bin:/usr/bin:/bin
USER team
WORKDIR /home/team
"""
_CONDA = """
FROM {base}
COPY wheels /wheels
COPY conda/ /opt/conda/
RUN mkdir -p /opt/conda/conda-meta \\
 && echo /opt/conda/lib > /etc/ld.so.conf.d/conda.conf && ldconfig \\
 && /opt/conda/bin/python3 -m ensurepip >/dev/null \\
 && /opt/conda/bin/python3 -m pip install -q --no-index --find-links /wheels \\
      --no-warn-script-location "ray[default]=={ray}" \\
 && rm -rf /wheels && test -x /opt/conda/bin/ray
ENV PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""
_NO_IPTABLES = """
FROM {base}
RUN dpkg --purge iptables >/dev/null && ! command -v iptables
"""
KINDS = ("system", "venv", "conda", "no-iptables")
_SKIP = {"site-packages", "test", "__pycache__", "idlelib", "tkinter", "turtledemo"}


def ensure(builder: ImageBuilder, kind: str, ray: str = RAY, python: Path | None = None) -> str:
    """The tag of the ``kind`` team image with Ray ``ray``, built on first use; ``python``: the
    prefix of the standalone CPython a ``conda`` image relocates (default: the running one)."""
    client = builder.client
    if kind == "no-iptables":
        base = ensure(builder, "system", ray)
        dockerfile = _NO_IPTABLES.format(base=base)
        return _build(client, f"raychaos-test/team:{ray}-no-iptables", dockerfile, None, None)
    prefix = (python or Path(sys.base_prefix)) if kind == "conda" else None
    minor = _minor(prefix) if prefix else "3.11"
    base = builder.ensure_base("3.11")
    wheels = builder.wheelhouse(ray, minor)
    template = {"system": _SYSTEM, "venv": _VENV, "conda": _CONDA}[kind]
    dockerfile = template.format(base=base, ray=ray)
    suffix = f"-py{minor}" if python else ""
    return _build(client, f"raychaos-test/team:{ray}-{kind}{suffix}", dockerfile, wheels, prefix)


def _minor(prefix: Path) -> str:
    """x.y of the CPython installed in ``prefix`` (from its lib/pythonX.Y directory)."""
    (lib,) = [p.name for p in (prefix / "lib").glob("python3.*") if (p / "os.py").is_file()]
    return lib.removeprefix("python")


def _build(
    client: docker.DockerClient,
    tag: str,
    dockerfile: str,
    wheels: Path | None,
    prefix: Path | None,
) -> str:
    recipe = hashlib.sha256((dockerfile + str(prefix) + sys.version).encode()).hexdigest()[:12]
    try:
        if (client.images.get(tag).labels or {}).get(RECIPE_LABEL) == recipe:
            return tag
    except docker.errors.ImageNotFound:
        pass
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        _add_bytes(tar, "Dockerfile", dockerfile.encode())
        for wheel in sorted(wheels.glob("*.whl")) if wheels else ():
            tar.add(wheel, arcname=f"wheels/{wheel.name}")
        if prefix is not None:
            for path, arcname in _prefix_members(prefix):
                tar.add(path, arcname=arcname, recursive=False)
    context.seek(0)
    options: dict[str, Any] = {**DOCKER_BUILD_OPTIONS}
    for chunk in client.api.build(
        fileobj=context, custom_context=True, tag=tag, labels={RECIPE_LABEL: recipe}, **options
    ):
        if "error" in chunk:
            raise RuntimeError(f"building {tag}: {chunk['error']}")
    return tag


def _prefix_members(prefix: Path) -> Iterator[tuple[Path, str]]:
    """The interpreter, libpython and the standard library of ``prefix`` (no site-packages,
    tests or build config), as ``conda/…`` members."""
    minor = f"python{_minor(prefix)}"
    wanted = [prefix / "bin", prefix / "lib" / minor, *sorted((prefix / "lib").glob("libpython*"))]
    for top in wanted:
        if top.is_file():
            yield top, f"conda/{top.relative_to(prefix)}"
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in _SKIP and not d.startswith("config-")]
            here = Path(root)
            yield here, f"conda/{here.relative_to(prefix)}"
            for name in files:
                path = here / name
                if top.name == "bin" and not name.startswith(("python", "2to3", "pydoc")):
                    continue  # the host's console scripts point at the host's prefix
                yield path, f"conda/{path.relative_to(prefix)}"


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
