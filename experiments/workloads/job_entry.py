"""The entrypoint of the JOBS family's jobs: ``python -u -m workloads.job_entry [options]``.

A real Ray driver (``ray.init`` with the address the job supervisor gives it, one task run to
prove it; ``--no-ray``: none, for a job that must add no GCS client to a GCS outage) that writes what the experiments read back from the job's own log:

- ``raychaos-job pid=<pid> started=<t>``: its PID (the victim of JOBS-02) and start time;
- ``raychaos-job child=<pid>``: with ``--child``, a ``sleep`` it started (the process tree a
  ``ray job stop`` must reach, JOBS-04);
- ``raychaos-job tick=<t>`` every :data:`TICK_S`: the last one dates its death within a tick;
- ``raychaos-job sigterm=<t> <exit|ignore>``: with ``--on-term``, when SIGTERM came and what it
  did (exit 0, or carry on until SIGKILL).

Times are wall-clock (containers share the host's clock). It ticks until ``--seconds`` (then
exits 0) or until it is killed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from types import FrameType

import ray

#: Seconds between ticks (0.25 s): the resolution of "when did the entrypoint die".
TICK_S = 0.25
MARK = "raychaos-job"


def say(text: str) -> None:
    print(f"{MARK} {text}", flush=True)


@ray.remote(num_cpus=0)
def _ok() -> str:
    return "ok"


def _on_term(action: str) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        say(f"sigterm={time.time():.3f} {action}")
        if action == "exit":
            sys.exit(0)

    # Installed after ray.init, so Ray's own handlers do not replace it.
    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workloads.job_entry")
    parser.add_argument("--seconds", type=float, default=0.0, help="exit 0 after (0: never)")
    parser.add_argument("--child", action="store_true", help="start a sleep child first")
    parser.add_argument("--on-term", choices=("exit", "ignore"), default=None)
    parser.add_argument("--no-ray", action="store_true", help="tick without connecting to Ray")
    args = parser.parse_args(argv)

    if not args.no_ray:
        ray.init(log_to_driver=False)
        ray.get(_ok.remote(), timeout=120)
    if args.on_term:
        _on_term(args.on_term)
    start = time.time()
    say(f"pid={os.getpid()} started={start:.3f}")
    if args.child:
        child = subprocess.Popen(["sleep", "600"])
        say(f"child={child.pid}")
    while not args.seconds or time.time() - start < args.seconds:
        say(f"tick={time.time():.3f}")
        time.sleep(TICK_S)  # the heartbeat's period, not a wait for anything
    return 0


if __name__ == "__main__":
    sys.exit(main())
