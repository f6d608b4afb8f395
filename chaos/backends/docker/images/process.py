"""Build steps run as bounded subprocesses: a hang becomes one error, never a stalled worker.

Each step runs in its own process group, so the kill at its bound reaches every child it
started (debootstrap's wget and dpkg, pip's), and a Ctrl-C never leaves one running.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
from pathlib import Path

from chaos.errors import ImageBuildError

#: After a step's process group is killed, how long its output pipes may stay open (a
#: process that left the group — a daemon started in the chroot — can hold them forever).
KILLED_OUTPUT_WAIT_S = 10.0


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


def unmount_below(root: Path) -> None:
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
