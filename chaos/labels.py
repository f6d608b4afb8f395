"""Labels and names on every Docker object raychaos creates (testcontainers' shape).

Every container, network and volume carries ``raychaos.run`` (the session), the xdist worker,
the owning process and the test, so that a sweep can tell live runs from dead ones and a
person can tell what a leftover object was for.

The owner is named by its PID and start time, within one PID namespace of one boot of one
machine: ``owner-machine`` (``/etc/machine-id``) tells machines apart (host names repeat, and
every Linux host's root PID namespace has the same id), ``owner-boot`` (the kernel's random
boot id) tells boots apart. :func:`judge` reads them: an owner is dead only when that can be
proven from here; anything else — another machine, another namespace, an unreadable ``/proc``
— is unknown, and unknown means keep.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

PREFIX = "raychaos."
RUN = PREFIX + "run"
WORKER = PREFIX + "worker"
OWNER_PID = PREFIX + "owner-pid"
OWNER_START = PREFIX + "owner-start"
OWNER_HOST = PREFIX + "owner-host"
#: PID namespace of the owner: a PID means nothing in another namespace (sandboxes, containers).
OWNER_PIDNS = PREFIX + "owner-pidns"
#: The owner's machine (``/etc/machine-id``): host names are not unique on a shared engine.
OWNER_MACHINE = PREFIX + "owner-machine"
#: The owner's kernel boot (``…/random/boot_id``): a PID means nothing after a reboot.
OWNER_BOOT = PREFIX + "owner-boot"
TEST = PREFIX + "test"
CLUSTER = PREFIX + "cluster"
ROLE = PREFIX + "role"
NODE = PREFIX + "node"
#: Images are a cache and never swept; they carry the recipe hash instead of a run.
IMAGE_RECIPE = PREFIX + "recipe"
IMAGE_KIND = PREFIX + "image"

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
#: Clock difference tolerated between the engine (object creation times) and this host.
CLOCK_SLACK_S = 120.0

_UNSAFE = re.compile(r"[^a-z0-9-]+")

ProcessState = Literal["alive", "dead", "unknown"]


def _read_first_line(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.readline().strip()
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start ticks) of ``pid`` from /proc, or None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name (field 2) may contain spaces, so split after its ')'.
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[0], fields[19]  # fields 3 (state) and 22 (start time in clock ticks)
    except (OSError, IndexError):
        return None


def process_start_ticks(pid: int) -> str:
    """The process start time in clock ticks (from /proc), so a reused PID is not mistaken."""
    stat = _stat(pid)
    return stat[1] if stat else ""


def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def machine_id() -> str:
    """This machine's id (systemd's ``/etc/machine-id``, else D-Bus's); "" when there is none."""
    for path in MACHINE_ID_FILES:
        if found := _read_first_line(path):
            return found
    return ""


def boot_id() -> str:
    """The running kernel's boot id (random per boot); "" without /proc."""
    return _read_first_line(BOOT_ID_FILE)


def boot_time() -> float | None:
    """When this boot began (``btime`` in /proc/stat, seconds since the epoch)."""
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def process_state(pid: int, start: str) -> ProcessState:
    """Whether ``pid`` (in this PID namespace) is still the process that started at ``start``.

    Absence is asked of the kernel (``kill(pid, 0)``), which ``hidepid`` cannot hide; the start
    time comes from /proc. A zombie has exited. What cannot be read is ``unknown``.
    """
    if pid <= 0:
        return "unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass  # it exists, owned by someone else
    except OSError:
        return "unknown"
    stat = _stat(pid)
    if stat is None:
        return "unknown"  # hidepid, or it exited just now: the next look will tell
    state, ticks = stat
    if state in ("Z", "X"):
        return "dead"
    if not start:
        return "unknown"
    return "alive" if ticks == start else "dead"


def owner_labels(pid: int | None = None) -> dict[str, str]:
    """The labels that name the owning process (``pid``, default this one)."""
    pid = os.getpid() if pid is None else pid
    return {
        OWNER_PID: str(pid),
        OWNER_START: process_start_ticks(pid),
        OWNER_HOST: socket.gethostname(),
        OWNER_PIDNS: pid_namespace(),
        OWNER_MACHINE: machine_id(),
        OWNER_BOOT: boot_id(),
    }


@dataclass(frozen=True)
class Here:
    """Where a sweep runs: what an owner's labels are compared with."""

    machine: str
    boot: str
    pidns: str
    hostname: str
    boot_time: float | None

    @classmethod
    def current(cls) -> Here:
        return cls(machine_id(), boot_id(), pid_namespace(), socket.gethostname(), boot_time())


@dataclass(frozen=True)
class Verdict:
    """Whether an object's owner is provably dead, and why (the sweep counts the reasons)."""

    dead: bool
    reason: str


OWNER_ALIVE = "owner alive"
OWNER_GONE = "owner gone"
BOOT_ENDED = "owner's boot ended"
OTHER_MACHINE = "other machine"
OTHER_PIDNS = "other PID namespace"
UNREADABLE = "owner unreadable here (/proc)"
NO_OWNER = "no owner labels"
UNKNOWN_BOOT = "boot id unknown"
CLONED = "other boot, created during this one (a cloned machine id?)"
LEGACY = "older raychaos labels, owner not provably dead"


def judge(
    obj_labels: Mapping[str, str], here: Here | None = None, created: float | None = None
) -> Verdict:
    """Dead = same machine, and (another boot, or same boot and PID namespace, /proc readable
    and the PID gone or started at another time). Everything else is kept.

    ``created`` (seconds since the epoch, the engine's clock) guards the other-boot rule: an
    object created after this boot began cannot come from an earlier boot of this machine —
    its owner is a clone with the same machine id, alive for all we know.
    """
    here = here or Here.current()
    pid, start = obj_labels.get(OWNER_PID, ""), obj_labels.get(OWNER_START, "")
    if not pid.isdigit() or int(pid) <= 0:
        return Verdict(False, NO_OWNER)
    machine, boot = obj_labels.get(OWNER_MACHINE), obj_labels.get(OWNER_BOOT)
    if machine is None or boot is None:
        return _judge_legacy(obj_labels, here, int(pid), start)
    if not machine or machine != here.machine:
        return Verdict(False, OTHER_MACHINE)
    if not boot or not here.boot:
        return Verdict(False, UNKNOWN_BOOT)
    if boot != here.boot:
        began = here.boot_time
        if created is not None and began is not None and created > began + CLOCK_SLACK_S:
            return Verdict(False, CLONED)
        return Verdict(True, BOOT_ENDED)
    pidns = obj_labels.get(OWNER_PIDNS, "")
    if not pidns or not here.pidns:
        return Verdict(False, UNREADABLE)
    if pidns != here.pidns:
        return Verdict(False, OTHER_PIDNS)
    return _by_process(int(pid), start)


def _judge_legacy(obj_labels: Mapping[str, str], here: Here, pid: int, start: str) -> Verdict:
    """Objects of a raychaos without machine and boot ids: dead only by the old rule (same host
    name and PID namespace) and a readable, conclusive /proc."""
    pidns = obj_labels.get(OWNER_PIDNS, "")
    if obj_labels.get(OWNER_HOST) != here.hostname or not pidns or pidns != here.pidns:
        return Verdict(False, LEGACY)
    return _by_process(pid, start)


def _by_process(pid: int, start: str) -> Verdict:
    state = process_state(pid, start)
    if state == "dead":
        return Verdict(True, OWNER_GONE)
    return Verdict(False, OWNER_ALIVE if state == "alive" else UNREADABLE)


@dataclass(frozen=True)
class RunIdentity:
    """Who owns the objects this process creates."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    worker: str = "main"
    pid: int = field(default_factory=os.getpid)

    def labels(self, **extra: str) -> dict[str, str]:
        labels = {RUN: self.run_id, WORKER: self.worker, **owner_labels(self.pid)}
        labels.update({PREFIX + k.replace("_", "-"): v for k, v in extra.items()})
        return labels

    def name(self, *parts: str) -> str:
        """``raychaos-<run>-<worker>-<parts…>``, DNS-safe and at most 63 characters."""
        raw = "-".join(("raychaos", self.run_id, self.worker, *parts)).lower()
        return _UNSAFE.sub("-", raw).strip("-")[:63]
