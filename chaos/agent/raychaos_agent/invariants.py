"""Postcondition INV-01, checked from inside the cluster after an experiment.

    python -m raychaos_agent.invariants TIMEOUT_S

Polls until available CPU equals total CPU of the alive nodes and no placement-group
resources remain, or the timeout passes. Emits ``inv01`` with what it saw; exit 0 when it holds.
"""

from __future__ import annotations

import sys
import time

from raychaos_agent import emit


def main(argv: list[str]) -> int:
    timeout = float(argv[0]) if argv else 60.0
    import ray

    ray.init(logging_level="ERROR")
    deadline = time.monotonic() + timeout
    while True:
        total = ray.cluster_resources()
        available = ray.available_resources()
        pg_keys = sorted(k for k in total if "_group_" in k)
        cpu_total, cpu_available = total.get("CPU", 0.0), available.get("CPU", 0.0)
        settled = abs(cpu_total - cpu_available) < 1e-6 and not pg_keys
        if settled or time.monotonic() > deadline:
            emit(
                "inv01",
                settled=settled,
                cpu_total=cpu_total,
                cpu_available=cpu_available,
                placement_group_resources=pg_keys,
            )
            return 0 if settled else 1
        time.sleep(0.5)  # sampling period of a bounded poll (deadline above)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    import os

    sys.stdout.flush()
    os._exit(code)
