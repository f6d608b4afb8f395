"""Labels and names on every Docker object raychaos creates (testcontainers' shape).

Every container, network and volume carries ``raychaos.run`` (the session), the xdist worker,
the owning process and the test, so that a sweep can tell live runs from dead ones and a
person can tell what a leftover object was for.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass, field

PREFIX = "raychaos."
RUN = PREFIX + "run"
WORKER = PREFIX + "worker"
OWNER_PID = PREFIX + "owner-pid"
OWNER_START = PREFIX + "owner-start"
OWNER_HOST = PREFIX + "owner-host"
#: PID namespace of the owner: a PID means nothing in another namespace (sandboxes, containers).
OWNER_PIDNS = PREFIX + "owner-pidns"
TEST = PREFIX + "test"
CLUSTER = PREFIX + "cluster"
ROLE = PREFIX + "role"
NODE = PREFIX + "node"
#: Images are a cache and never swept; they carry the recipe hash instead of a run.
IMAGE_RECIPE = PREFIX + "recipe"
IMAGE_KIND = PREFIX + "image"

_UNSAFE = re.compile(r"[^a-z0-9-]+")


def process_start_ticks(pid: int) -> str:
    """The process start time in clock ticks (from /proc), so a reused PID is not mistaken."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # Field 22; the command name (field 2) may contain spaces, so split after ')'.
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def owner_alive(pid: str, start: str, host: str, pidns: str = "") -> bool | None:
    """Whether the process that created an object still runs; None when we cannot tell."""
    if host != socket.gethostname() or pidns != pid_namespace():
        return None
    if not pid.isdigit():
        return False
    return process_start_ticks(int(pid)) == start and start != ""


@dataclass(frozen=True)
class RunIdentity:
    """Who owns the objects this process creates."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    worker: str = "main"
    pid: int = field(default_factory=os.getpid)

    def labels(self, **extra: str) -> dict[str, str]:
        labels = {
            RUN: self.run_id,
            WORKER: self.worker,
            OWNER_PID: str(self.pid),
            OWNER_START: process_start_ticks(self.pid),
            OWNER_HOST: socket.gethostname(),
            OWNER_PIDNS: pid_namespace(),
        }
        labels.update({PREFIX + k.replace("_", "-"): v for k, v in extra.items()})
        return labels

    def name(self, *parts: str) -> str:
        """``raychaos-<run>-<worker>-<parts…>``, DNS-safe and at most 63 characters."""
        raw = "-".join(("raychaos", self.run_id, self.worker, *parts)).lower()
        return _UNSAFE.sub("-", raw).strip("-")[:63]
