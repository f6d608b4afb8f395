"""Run pytest as a separate process, signal it mid-experiment, and look for what it left.

Shared by test_boot.py (the next run's sweep) and test_crash_matrix.py (the reaper and the
interrupt-aware teardown). Every wait is bounded (tenacity), never a bare sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import docker
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos.backends.docker.sweep import inventory, remove_leftovers
from chaos.labels import process_start_ticks, process_state

ROOT = Path(__file__).resolve().parents[2]
REAPER_MODULE = "chaos.backends.docker.reaper"
#: Booting a small cluster on a loaded 2-core machine (image present) takes minutes at worst.
BOOT_WITHIN_S = 420

#: A test that boots a small cluster, says so in ``{marker}`` (cluster key, run id, and the PID
#: of the process running it: pytest itself or an xdist worker), then waits to be signalled.
#: With ``experiment`` the postconditions and evidence are still ahead of it.
HANGING = """
import json
import os
import time

import pytest


@pytest.mark.cluster(workers=1)
def test_hangs({fixture}):
    cluster = {cluster}
    booted = {{
        "key": cluster.backend.key,
        "run": cluster.backend.identity.run_id,
        "pid": os.getpid(),
    }}
    with open({marker!r}, "w") as out:
        json.dump(booted, out)
    print("BOOTED", flush=True)
    time.sleep(600)
"""


def hanging(marker: Path, *, experiment: bool = True) -> str:
    """The source of the hanging test (``experiment``: mid-experiment, else a bare cluster)."""
    if experiment:
        return HANGING.format(
            fixture="experiment", cluster="experiment.cluster", marker=str(marker)
        )
    return HANGING.format(fixture="ray_cluster", cluster="ray_cluster", marker=str(marker))


def as_from_a_terminal() -> None:
    """In the child before exec: SIGINT handled as a terminal's process gets it. An xdist
    worker (and a background job) ignores SIGINT, and children inherit the ignore, so a
    Ctrl-C test run there would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pytest_process(args: list[str], cwd: Path, output: IO[str]) -> subprocess.Popen[str]:
    """``python -m pytest …`` in ``cwd``; its output goes to ``output`` (a file, so nothing
    blocks on a full pipe and no pipe is held open by the processes it starts)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-q",
            *args,
        ],
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        preexec_fn=as_from_a_terminal,
    )


def wait_booted(marker: Path, proc: subprocess.Popen[str], log: Path) -> dict[str, Any]:
    """The marker's content once the hanging test booted its cluster (fails if pytest ends)."""
    for attempt in Retrying(stop=stop_after_delay(BOOT_WITHIN_S), wait=wait_fixed(1), reraise=True):
        with attempt:
            assert marker.exists() or proc.poll() is not None
    assert marker.exists(), f"the cluster never booted:\n{log.read_text()[-4000:]}"
    for attempt in Retrying(stop=stop_after_delay(10), wait=wait_fixed(0.2), reraise=True):
        with attempt:  # written, not just created
            booted: dict[str, Any] = json.loads(marker.read_text())
    return booted


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    """Every container, network and volume labelled with ``run_id``."""
    return [f"{x.kind} {x.name}" for x in inventory(client, {"label": f"raychaos.run={run_id}"})]


def remove_run(client: docker.DockerClient, run_id: str) -> None:
    """Clean up after a failed check, so a red test leaks nothing either."""
    remove_leftovers(inventory(client, {"label": f"raychaos.run={run_id}"}))


def wait_no_leftovers(client: docker.DockerClient, run_id: str, within: float = 60) -> None:
    for attempt in Retrying(stop=stop_after_delay(within), wait=wait_fixed(1), reraise=True):
        with attempt:
            left = leftovers(client, run_id)
            assert left == [], f"still there {within:.0f} s after the signal: {left}"


def reapers_of(pid: int) -> dict[int, str]:
    """The reaper processes watching ``pid`` (their command line names it): PID → start time."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if REAPER_MODULE in words and _flag(words, "--owner-pid") == str(pid):
            found[int(entry.name)] = process_start_ticks(int(entry.name))
    return found


def _flag(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words[:-1] else None


def wait_exited(processes: dict[int, str], within: float = 60) -> None:
    """Each of ``processes`` (PID → start time) has exited (or is a zombie of its new parent)."""
    for attempt in Retrying(stop=stop_after_delay(within), wait=wait_fixed(0.5), reraise=True):
        with attempt:
            running = [p for p, s in processes.items() if process_state(p, s) == "alive"]
            assert running == [], f"still running: {running}"
