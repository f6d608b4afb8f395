"""Version skew (VER-03): a driver of one Ray release connecting to a cluster of another."""

from __future__ import annotations

import os
import sys
from typing import Any

import ray
from raychaos_agent import emit


def connect(address: str) -> dict[str, Any]:
    """``ray.init(address)`` from this node's Ray; returns versions if it connects, else raises."""
    emit("connecting", ray_version=ray.__version__, python=sys.version.split()[0], address=address)
    os.environ.pop("RAY_ADDRESS", None)
    ray.init(address=address)
    return {"connected": True, "ray_version": ray.__version__}
