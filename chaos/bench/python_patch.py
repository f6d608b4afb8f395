"""Ray images whose interpreter is another patch release of the image's Python (claim VER-02).

Debian bookworm offers one CPython 3.11 (3.11.2) and no registry is reachable, so the second
patch release is an interpreter the host already has: by default the one running pytest (on
the reference machine a pyenv 3.11.7), or any given with ``--raychaos-patch-python``. Its
libpython and standard library are copied into the Ray image at their original absolute path
and the image's venv is repointed at it: the same Ray wheels (cp311 ABI) on another 3.11.x.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from chaos.backends.docker.images import ImageBuilder
from chaos.backends.docker.probes import image_id, image_python
from chaos.errors import ImageBuildError, PythonPatchUnavailable
from chaos.resources import fixtures_path

#: Parts of a CPython prefix a Ray node never imports; leaving them out keeps the image small.
_SKIP = frozenset(
    {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "__pycache__", "ensurepip"}
)
_PROBE = (
    "import json, platform, sys, sysconfig; print(json.dumps({"
    "'version': platform.python_version(), 'implementation': platform.python_implementation(),"
    "'system': platform.system(), 'machine': platform.machine(),"
    "'prefix': sys.base_prefix, 'executable': getattr(sys, '_base_executable', sys.executable),"
    "'libdir': sysconfig.get_config_var('LIBDIR') or '',"
    "'ldlibrary': sysconfig.get_config_var('LDLIBRARY') or ''}))"
)


@dataclass(frozen=True)
class Interpreter:
    """A CPython installation on the host, as it reports itself."""

    executable: str
    prefix: str
    version: str
    libdir: str
    ldlibrary: str

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def host_interpreter() -> str:
    """The interpreter running raychaos (outside any venv): the default second patch release."""
    return str(getattr(sys, "_base_executable", sys.executable))


def probe(executable: str) -> Interpreter:
    """Ask ``executable`` what it is; refuse anything but a Linux CPython with its own prefix."""
    hint = "pass --raychaos-patch-python (or RAYCHAOS_PATCH_PYTHON) naming a CPython executable"
    try:
        proc = subprocess.run(
            [executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PythonPatchUnavailable(f"cannot run {executable}: {exc}", hint=hint) from exc
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        raise PythonPatchUnavailable(f"{executable} exited {proc.returncode}: {tail}", hint=hint)
    info = json.loads(proc.stdout)
    if (info["implementation"], info["system"]) != ("CPython", "Linux"):
        raise PythonPatchUnavailable(
            f"{executable} is {info['implementation']} on {info['system']}, "
            "expected CPython on Linux",
            hint=hint,
        )
    return Interpreter(
        executable=info["executable"],
        prefix=info["prefix"],
        version=info["version"],
        libdir=info["libdir"],
        ldlibrary=info["ldlibrary"],
    )


def ensure_image(
    builder: ImageBuilder,
    base: str,
    interpreter: Interpreter,
    container_labels: Mapping[str, str],
) -> str:
    """Tag of ``base`` with its venv on ``interpreter``; built once, then reused by its recipe.

    Raises :class:`PythonPatchUnavailable` when ``interpreter`` cannot make a patch skew with
    ``base`` (another minor release, or the very same patch).
    """
    have = image_python(builder.client, base, container_labels)
    if interpreter.version == have:
        raise PythonPatchUnavailable(
            f"{interpreter.executable} is Python {have}, the same patch release as {base}",
            hint="pass --raychaos-patch-python naming a CPython "
            f"{interpreter.minor}.x other than {have}",
        )
    if interpreter.minor != ".".join(have.split(".")[:2]):
        raise PythonPatchUnavailable(
            f"{interpreter.executable} is Python {interpreter.version}, another minor release "
            f"than {base}'s {have} (its Ray wheels would not load)",
            hint=f"pass --raychaos-patch-python naming a CPython {'.'.join(have.split('.')[:2])}.x",
        )
    dockerfile = fixtures_path("python-patch", "Dockerfile").read_bytes()
    base_id = image_id(builder.client, base)
    recipe = hashlib.sha256(
        "\n".join(
            [str(base_id), interpreter.executable, interpreter.version, dockerfile.hex()]
        ).encode()
    ).hexdigest()[:12]
    # raychaos/ray:2.60.0-py3.11 → raychaos/ray:2.60.0-py3.11.7; a user's image gets its own.
    release = base.removeprefix("raychaos/ray:").rsplit("-py", 1)[0]
    if release == base:
        release = f"custom-{recipe}"
    tag = f"raychaos/ray:{release}-py{interpreter.version}"
    with builder.locked(tag):
        if builder.current(tag, recipe):
            return tag
        builder.progress(f"building {tag}: {base} on {interpreter.executable}")
        with tempfile.TemporaryFile(dir=builder.settings.cache_dir) as context:
            _context_tar(context, dockerfile, interpreter)
            context.seek(0)
            builder.docker_build(
                tag,
                recipe,
                fileobj=context,
                custom_context=True,
                buildargs={
                    "BASE": base,
                    "PREFIX": interpreter.prefix,
                    "EXECUTABLE": interpreter.executable,
                    "PATCH": interpreter.version,
                },
            )
        builder.progress(f"built {tag}")
    return tag


def _context_tar(out: IO[bytes], dockerfile: bytes, interp: Interpreter) -> None:
    """Dockerfile plus ``python/``: the executable, libpython and the standard library."""
    prefix = Path(interp.prefix)
    stdlib = prefix / "lib" / f"python{interp.minor}"
    if not (stdlib / "os.py").is_file():
        raise ImageBuildError(
            f"{interp.executable} has no standard library at {stdlib}",
            hint="pass --raychaos-patch-python naming a self-contained CPython install "
            "(pyenv, python.org build)",
        )
    executable = Path(interp.executable)
    libpython = sorted(Path(interp.libdir).glob(f"{interp.ldlibrary}*")) if interp.ldlibrary else []
    members = list(dict.fromkeys([executable, executable.resolve(), *libpython]))

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = PurePosixPath(info.name).parts
        # config-3.11-<arch>/ holds the static libpython for building extensions: 44 MB unused.
        skip = _SKIP.intersection(parts) or any(p.startswith("config-") for p in parts)
        return None if skip else info

    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        for path in members:
            if path.exists() and path.is_relative_to(prefix):
                tar.add(path, arcname=f"python/{path.relative_to(prefix)}", filter=keep)
        tar.add(stdlib, arcname=f"python/{stdlib.relative_to(prefix)}", filter=keep)
