"""Version skew: a driver of another Ray release connecting (VER-03); interpreters (VER-02)."""

from __future__ import annotations

import os
import sys
from typing import Any

import ray
from raychaos_agent import emit, pin


def connect(address: str) -> dict[str, Any]:
    """``ray.init(address)`` from this node's Ray; returns versions if it connects, else raises."""
    emit("connecting", ray_version=ray.__version__, python=sys.version.split()[0], address=address)
    os.environ.pop("RAY_ADDRESS", None)
    ray.init(address=address)
    return {"connected": True, "ray_version": ray.__version__}


@ray.remote(num_cpus=0)
def _interpreter() -> dict[str, str]:
    import platform

    return {"python": platform.python_version(), "executable": sys.executable}


def interpreters(on: str) -> dict[str, Any]:
    """The Python of this driver, and of a worker process on node ``on`` (pinned, no retries)."""
    ray.init()
    remote = ray.get(_interpreter.options(scheduling_strategy=pin(on)).remote(), timeout=120)
    driver = {"python": sys.version.split()[0], "executable": sys.executable}
    emit("interpreters", driver=driver, remote=remote, on=on)
    return {"driver": driver, "remote": remote}
