"""Readiness: every expected node ALIVE in the GCS, read through a driver (no dashboard).

    python -m raychaos_agent.ready --address HEAD:PORT --expect IP,IP [--ignore-ids ID,ID]

Connects as a driver (retrying while the GCS or the local raylet is still starting), polls
``ray.nodes()`` and emits ``ready`` with ``{ip: node_id}`` once every expected IP has an ALIVE
node whose id is not ignored (a restarted node must come back under a new id). The dashboard
is not needed, so readiness does not wait for it; the observer waits for the State API.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from raychaos_agent import emit


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="raychaos_agent.ready")
    parser.add_argument("--address", required=True)
    parser.add_argument("--expect", required=True)
    parser.add_argument("--ignore-ids", default="")
    parser.add_argument("--period", type=float, default=0.2)
    args = parser.parse_args(argv)
    expect = {ip for ip in args.expect.split(",") if ip}
    ignore = {i for i in args.ignore_ids.split(",") if i}
    os.environ.pop("RAY_ADDRESS", None)

    import socket

    import ray

    host, _, port = args.address.rpartition(":")
    while True:  # bounded by the host: it runs us under `timeout`
        # ray.init backs off for long when the GCS is not up yet; a TCP probe is cheap.
        with socket.socket() as probe:
            probe.settimeout(1)
            if probe.connect_ex((host, int(port))) != 0:
                time.sleep(0.1)  # retry period of a bounded wait
                continue
        try:
            ray.init(
                address=args.address,
                logging_level="ERROR",
                log_to_driver=False,
                namespace="raychaos-ready",
            )
            break
        except Exception as exc:  # noqa: BLE001 - GCS or local raylet not up yet: retry
            emit("not_ready", error=f"{type(exc).__name__}: {str(exc)[:200]}")
            time.sleep(0.5)  # retry period of a bounded wait
    emit("connected")
    seen: set[str] = set()
    while True:
        alive = {
            n["NodeManagerAddress"]: n["NodeID"]
            for n in ray.nodes()
            if n["Alive"] and n["NodeID"] not in ignore
        }
        for ip in sorted(set(alive) - seen):
            emit("node_state", node_ip=ip, node_id=alive[ip], state="ALIVE")
        seen = set(alive)
        if expect <= set(alive):
            emit("ready", nodes={ip: alive[ip] for ip in sorted(expect)})
            return 0
        time.sleep(args.period)  # sampling period of a bounded wait


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # skip ray's atexit: nothing of ours to flush, and it can be slow
