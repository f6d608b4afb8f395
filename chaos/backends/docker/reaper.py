"""The reaper: when a process that created Docker objects dies, by any signal, remove them.

Teardown cannot run after SIGKILL, a crashed xdist worker or a cancelled CI job, and the next
sweep may never come. So a process's first Docker connection starts one small host process
(``python -m chaos.backends.docker.reaper``, in its own session, output to a log under the
cache directory) that watches its owner by PID and start time and, once the owner is gone,
removes the containers, networks and volumes whose owner labels are exactly its owner's
(except clusters kept for inspection), looking again until a pass finds nothing.

A host process, not a container like testcontainers' Ryuk: a reaper container would need the
Docker socket (root on the host) and an image pulled from a registry this project does not
have. What it cannot survive, being killed itself, the next run's sweep covers
(README, "Cleanup").
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from chaos import labels
from chaos.backends.docker.sweep import (
    REMOVE_TIMEOUT_S,
    inventory,
    kept_clusters,
    remove_leftovers,
)
from chaos.resources import default_cache_dir

if TYPE_CHECKING:
    import docker

MODULE = "chaos.backends.docker.reaper"
#: How often the reaper looks at its owner.
POLL_S = 1.0
#: Bound on the cleanup after the owner is gone (passes until one finds nothing).
CLEANUP_BOUND_S = 45.0
#: Between cleanup passes: an engine call in flight when the owner died may still create one.
PASS_PERIOD_S = 2.0
#: After SIGTERM, how long the reaper still waits for its owner to die before it just exits.
TERM_GRACE_S = 5.0
LOG_MAX_AGE_S = 7 * 24 * 3600
#: The labels that name an owner exactly; the reaper removes an object only if all match.
OWNER_KEYS = (
    labels.OWNER_PID,
    labels.OWNER_START,
    labels.OWNER_BOOT,
    labels.OWNER_MACHINE,
    labels.OWNER_PIDNS,
)
_FLAGS = {key: "--" + key.removeprefix(labels.PREFIX) for key in OWNER_KEYS}

#: (owner PID, engine URL or "") → its reaper.
_started: dict[tuple[int, str], subprocess.Popen[bytes]] = {}


# -- the decision ---------------------------------------------------------------------------
def owner_of(all_labels: Mapping[str, str]) -> dict[str, str]:
    """The owner-naming subset of an object's (or a process's) labels."""
    return {key: all_labels.get(key, "") for key in OWNER_KEYS}


def nameable(owner: Mapping[str, str]) -> bool:
    """Whether ``owner`` is named exactly enough to act on (PID, start time and boot id)."""
    pid = owner.get(labels.OWNER_PID, "")
    return (
        pid.isdigit() and bool(owner.get(labels.OWNER_START)) and bool(owner.get(labels.OWNER_BOOT))
    )


def belongs(obj_labels: Mapping[str, str], owner: Mapping[str, str]) -> bool:
    """An object belongs to ``owner`` when every owner label is present and equal."""
    return nameable(owner) and all(obj_labels.get(key) == owner[key] for key in OWNER_KEYS)


@dataclass
class Pass:
    """One cleanup pass: what it removed, what failed, how many kept objects it left."""

    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped_kept: int = 0
    #: Why the cleanup stopped before a pass found nothing (engine unreachable, …).
    gave_up: str = ""


def reap_once(
    client: docker.DockerClient,
    owner: Mapping[str, str],
    kept: set[str] | None = None,
    timeout: float = REMOVE_TIMEOUT_S,
) -> Pass:
    """Remove every object of ``owner`` but kept clusters: containers, networks, volumes."""
    if not nameable(owner):
        return Pass()
    selector: dict[str, str | list[str] | bool] = {
        "label": [
            f"{labels.OWNER_PID}={owner[labels.OWNER_PID]}",
            f"{labels.OWNER_START}={owner[labels.OWNER_START]}",
        ]
    }
    found = [x for x in inventory(client, selector) if belongs(x.labels, owner)]
    kept = kept_clusters() if kept is None else kept
    doomed = [x for x in found if not (x.cluster and x.cluster in kept)]
    removed, failed = remove_leftovers(doomed, timeout)
    return Pass(removed, failed, len(found) - len(doomed))


# -- the watch ------------------------------------------------------------------------------
class Owner:
    """The watched process: gone once it exited (or its PID now names another process)."""

    def __init__(self, pid: int, start: str) -> None:
        self.pid = pid
        self.start = start
        #: Started by the owner itself: a new parent PID means the owner exited.
        self.direct = os.getppid() == pid

    def gone(self) -> bool:
        if self.direct and os.getppid() != self.pid:
            return True
        return labels.process_state(self.pid, self.start) == "dead"


def cleanup(
    connect: Callable[[], docker.DockerClient],
    owner: Mapping[str, str],
    say: Callable[[str], None],
    bound_s: float = CLEANUP_BOUND_S,
) -> Pass:
    """Passes of :func:`reap_once` until one finds nothing to remove (at most ``bound_s``)."""
    from chaos.waits import poll

    total = Pass()
    client: docker.DockerClient | None = None

    def one_pass() -> None:
        nonlocal client
        try:
            client = client or connect()
            result = reap_once(client, owner)
        except Exception as exc:  # an engine hiccup: look again
            raise AssertionError(f"engine: {exc}") from exc
        total.removed += result.removed
        total.failed = result.failed
        total.skipped_kept = result.skipped_kept
        for line in result.removed:
            say(f"removed {line}")
        for line in result.failed:
            say(f"could not remove {line}")
        if result.removed or result.failed:
            raise AssertionError("removed objects; looking again for late ones")

    try:
        poll(one_pass, bound_s, PASS_PERIOD_S)
    except AssertionError as exc:
        total.gave_up = str(exc)
        say(f"gave up after {bound_s:.0f} s: {exc}")
    finally:
        if client is not None:
            client.close()
    return total


# -- the owner's side -----------------------------------------------------------------------
def start(run_id: str = "", engine: str | None = None) -> subprocess.Popen[bytes] | None:
    """Start this process's reaper for ``engine`` (a URL; None: the engine of DOCKER_HOST),
    once per process and engine; None when it cannot be started."""
    pid = os.getpid()
    if (pid, engine or "") in _started:
        return _started[(pid, engine or "")]
    owner = owner_of(labels.owner_labels(pid))
    if not nameable(owner):
        return None  # /proc cannot name this process exactly: only the sweep can help
    argv = [sys.executable, "-m", MODULE, "--run", run_id]
    if engine:
        argv += ["--engine", engine]
    for key in OWNER_KEYS:
        argv += [_FLAGS[key], owner[key]]
    # A checkout imported through sys.path is put on the child's path too; an installed
    # package is importable anyway (and site-packages must not go before the stdlib).
    root = Path(__file__).resolve().parents[3]
    extra = "" if root.name in ("site-packages", "dist-packages") else str(root)
    path = os.pathsep.join(p for p in (extra, os.environ.get("PYTHONPATH", "")) if p)
    log = _log_path(owner, engine)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        output = log.open("ab")
        argv += ["--log", str(log)]
    except OSError:
        output = open(os.devnull, "wb")  # noqa: SIM115 - handed to the child, closed below
    try:
        with output:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                cwd="/",
                env={**os.environ, "PYTHONPATH": path},
            )
    except OSError:
        return None
    _started[(pid, engine or "")] = proc
    return proc


def check() -> str | None:
    """At the owner's session end: collect reapers that exited early (no zombie), say so."""
    pid = os.getpid()
    early = [
        f"the reaper (pid {proc.pid}{f', engine {engine}' if engine else ''}) exited early "
        f"with {proc.returncode}"
        for (owner, engine), proc in _started.items()
        if owner == pid and proc.poll() is not None
    ]
    return f"{'; '.join(early)}; see {_log_dir()}" if early else None


def _log_dir() -> Path:
    return default_cache_dir() / "reaper"


def _log_path(owner: Mapping[str, str], engine: str | None = None) -> Path:
    """``<pid>-<start>.log``; a reaper of an engine other than DOCKER_HOST's adds a short
    digest of the engine's URL (one process may have a reaper per engine)."""
    from chaos.backends.docker.engines import default_url

    stem = f"{owner[labels.OWNER_PID]}-{owner[labels.OWNER_START]}"
    if engine and engine != default_url():
        stem += "-" + hashlib.sha256(engine.encode()).hexdigest()[:8]
    return _log_dir() / f"{stem}.log"


# -- the reaper's side ----------------------------------------------------------------------
def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    for key in OWNER_KEYS:
        parser.add_argument(_FLAGS[key], dest=key, required=key != labels.OWNER_MACHINE)
    parser.add_argument("--run", default="")
    parser.add_argument("--engine", default="", help="the engine's URL (default: DOCKER_HOST)")
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--poll", type=float, default=POLL_S)
    return parser.parse_args(argv)


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", flush=True)


def _prune_logs(keep: Path | None) -> None:
    cutoff = time.time() - LOG_MAX_AGE_S
    for old in _log_dir().glob("*.log") if _log_dir().is_dir() else ():
        try:
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            continue


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    owner = {key: str(getattr(args, key) or "") for key in OWNER_KEYS}
    if not nameable(owner):
        _say(f"owner not named exactly ({owner}); nothing to watch")
        return 2
    watched = Owner(int(owner[labels.OWNER_PID]), owner[labels.OWNER_START])
    terminated: list[float] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        terminated.append(time.monotonic())

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, on_term)
    _prune_logs(args.log)
    engine = args.engine or None
    _say(
        f"watching pid {watched.pid} (run {args.run or '?'}, parent: {watched.direct}, "
        f"engine {engine or 'of DOCKER_HOST'})"
    )
    idle = threading.Event()  # never set: a sleep that signals can interrupt
    while not watched.gone():
        if terminated and time.monotonic() - terminated[0] > TERM_GRACE_S:
            _say("terminated while the owner still runs: exiting without cleanup")
            return 0
        idle.wait(args.poll)
    _say(f"owner {watched.pid} is gone: removing its objects")
    from chaos.backends.docker.client import connect

    result = cleanup(lambda: connect(timeout=REMOVE_TIMEOUT_S, url=engine), owner, _say)
    if result.skipped_kept:
        _say(f"left {result.skipped_kept} object(s) of clusters kept for inspection")
    if result.failed or result.gave_up:
        return 1
    if args.log is not None and not result.removed and not result.skipped_kept:
        args.log.unlink(missing_ok=True)  # a normal end: nothing worth a log
    return 0


if __name__ == "__main__":
    sys.exit(main())
