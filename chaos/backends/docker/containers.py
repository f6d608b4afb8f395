"""What goes into a Docker container of a cluster: its host config and the archives put in.

Apart from :mod:`backend` so that class stays the verbs; these are pure functions of a plan.
"""

from __future__ import annotations

import contextlib
import io
import re
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.backends.docker.client import translated
from chaos.errors import DockerOperationError, WorkloadError
from chaos.spec.plan import LIB_DIR

if TYPE_CHECKING:
    from docker.models.containers import Container

    from chaos.spec.plan import NodePlan

#: Every container: setuid binaries and file capabilities can never raise privileges.
SECURITY_OPTS = ("no-new-privileges",)


def host_config(node: NodePlan) -> dict[str, Any]:
    """docker-py ``create_host_config`` keywords for ``node``: limits, mounts, posture."""
    config: dict[str, Any] = {
        "init": True,
        "cap_drop": ["ALL"],
        "cap_add": sorted(node.capabilities) or None,
        "security_opt": list(SECURITY_OPTS),
        "shm_size": node.shm_bytes,
        "mem_limit": node.memory_bytes,
        "memswap_limit": node.memory_bytes,
        "nano_cpus": int(node.cpu_limit * 1e9) if node.cpu_limit else None,
        "binds": {v: {"bind": p, "mode": "rw"} for v, p in node.volumes.items()} or None,
        "tmpfs": dict(node.tmpfs) or None,
        "pids_limit": node.pids_limit,
    }
    # None means "the engine's default" to docker-py: kept only where that is what we mean.
    return {k: v for k, v in config.items() if v is not None or k == "cap_add"}


def lib_archive(sources: Sequence[Path]) -> bytes:
    """Package directories as a tar rooted at ``/``, under the nodes' library directory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for source in sources:
            if not source.is_dir():
                raise WorkloadError(
                    f"workload package {source} does not exist",
                    hint="set raychaos_workloads (ini) to directories of Python packages",
                )
            tar.add(
                str(source), arcname=f"{LIB_DIR.lstrip('/')}/{source.name}", filter=_skip_caches
            )
    return buffer.getvalue()


def secrets_archive(files: Mapping[str, str], uid: int, gid: int, mode: int = 0o400) -> bytes:
    """``files`` as a tar rooted at ``/``: ``mode`` (0400), owned by ``uid:gid`` (the daemon
    keeps both); missing parent directories are made 0755 by root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, content in files.items():
            data = content.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def ids_of(container: Container, user: str | None) -> tuple[int, int]:
    """uid and gid of ``user`` in ``container``'s image (root when None; numeric as given)."""
    if not user or user == "root":
        return 0, 0
    numeric = re.fullmatch(r"(\d+)(?::(\d+))?", user)
    if numeric:
        return int(numeric.group(1)), int(numeric.group(2) or numeric.group(1))
    with translated(f"read /etc/passwd of {container.name}"):
        stream, _ = container.get_archive("/etc/passwd")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile(tar.getmembers()[0])
            passwd = member.read().decode(errors="replace") if member else ""
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) > 3 and fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise DockerOperationError(
        f"user {user!r} is not in /etc/passwd of {container.name}'s image",
        hint="Redis runs as the `redis` user Debian's redis-server package creates; use an "
        "image with that package (raychaos's base image has it)",
    )


def _skip_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if "__pycache__" in info.name or info.name.endswith(".pyc"):
        return None
    info.uid = info.gid = 0
    return info


@contextlib.contextmanager
def explained_if_stopped(container: Container) -> Iterator[None]:
    """An exec into a host whose main process ended says how it ended and what it printed
    (an image without our node entry, a `ray start` that could not run), not only that the
    engine refused the exec."""
    try:
        yield
    except DockerOperationError as exc:
        if "is not running" not in exc.message:
            raise
        with contextlib.suppress(Exception):
            container.reload()
        state = (container.attrs or {}).get("State", {})
        if state.get("Status") != "exited":
            raise
        tail = ""
        with contextlib.suppress(Exception):
            logged = bytes(container.logs(tail=4)).decode(errors="replace")
            tail = " | ".join(logged.split("\n"))
        raise DockerOperationError(
            f"{container.name} is not running: its main process exited with "
            f"{state.get('ExitCode')}; last output: {tail.strip(' |') or '(none)'}",
            hint="the node entry or `ray start` failed inside the image: for an image of your "
            "own see the image contract (raychaos's docs/images.md); "
            f"`docker logs {container.name}` with --raychaos-keep",
        ) from None
