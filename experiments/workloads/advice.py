"""Runbook advice under test (claims ADVICE-01..04): each function tries the advice exactly as
written and returns what Ray did with it (rejected, with the exception or CLI error, or
silently ignored)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from raychaos_agent import emit, knobs, node_ip

from workloads.scheduling import describe_error


def ray_start_options(
    options: list[str] | None = None, address: str = "127.0.0.1:1"
) -> dict[str, Any]:
    """ADVICE-01: pass runbook ``ray start`` options; report exit code and the CLI's message.

    ``address`` points nowhere, so an accepted option could not join a second raylet anywhere.
    Never runs ``ray stop`` (that would kill the raylet of the node it runs on).
    Also reports whether ``ray start --help`` mentions each option.
    """
    options = options or ["--memory-monitor-interval-ms=100", "--raylet-death-on-oom=false"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    help_text = subprocess.run(
        ["ray", "start", "--help"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    out: dict[str, Any] = {
        "in_help": {o.split("=")[0]: o.split("=")[0] in help_text for o in options}
    }
    for opt in options:
        t0 = time.time()
        proc = subprocess.run(
            ["ray", "start", f"--address={address}", opt],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        out[opt] = {
            "rc": proc.returncode,
            "seconds": round(time.time() - t0, 2),
            "output_tail": (proc.stdout + proc.stderr).strip().splitlines()[-4:],
        }
        emit("option_tried", option=opt, rc=proc.returncode)
    # No `ray stop` here: it would kill this node's own raylet. A rejected option starts
    # nothing; only clean up if an option was (unexpectedly) accepted.
    if any(isinstance(v, dict) and v.get("rc") == 0 for v in out.values()):
        out["warning"] = "an option was accepted; a second ray start may have run on this node"
    return out


def init_with_strategy(strategy: str = "SPREAD") -> dict[str, Any]:
    """ADVICE-02: ``ray.init(scheduling_strategy=...)`` as a global default."""
    import ray

    try:
        ray.init(scheduling_strategy=strategy)
        connected = ray.is_initialized()
        ray.shutdown()
        return {"accepted": True, "connected": connected}
    except Exception as exc:  # noqa: BLE001 - outcome under test
        return {
            "accepted": False,
            "error": describe_error(exc),
            "connected_after": ray.is_initialized(),
        }


def submit_with_max_resources() -> dict[str, Any]:
    """ADVICE-03: ``JobSubmissionClient.submit_job(max_resources=...)``."""
    import inspect

    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(f"http://{node_ip('head')}:8265")
    params = list(inspect.signature(client.submit_job).parameters)
    try:
        job = client.submit_job(entrypoint="echo hi", max_resources={"CPU": 2})
        return {"accepted": True, "job": job, "params": params}
    except Exception as exc:  # noqa: BLE001 - outcome under test
        return {"accepted": False, "error": describe_error(exc), "params": params}


def knob_known(name: str = "SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER") -> dict[str, Any]:
    """ADVICE-04: does any file of the installed Ray (Python or the raylet/GCS binaries) even
    contain the knob's name? Also the ``RAY_*`` env this process sees."""
    import ray

    root = Path(ray.__file__).parent
    needles = [name.encode(), name.lower().encode()]
    hits: list[str] = []
    scanned = 0
    for path in root.rglob("*"):
        if not path.is_file() or path.suffix not in {".py", ".so", ""}:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        scanned += 1
        if any(n in data for n in needles):
            hits.append(str(path.relative_to(root)))
    # A known knob as a control: the scanner must find it.
    control = b"scheduler_spread_threshold"
    control_hits = [
        str(p.relative_to(root))
        for p in root.rglob("*.so")
        if p.is_file() and control in p.read_bytes()
    ]
    return {
        "name": name,
        "files_scanned": scanned,
        "hits": hits,
        "control": control.decode(),
        "control_hits": control_hits[:5],
        "knobs": knobs(),
    }
