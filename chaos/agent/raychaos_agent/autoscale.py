"""The provider's wishes, read on the head: which worker nodes Ray's autoscaler wants.

    python -m raychaos_agent.autoscale DIR [--period 0.25] [--timeout S]

Ray's fake multi-node Docker provider keeps its nodes in ``DIR/nodes.json`` (rewritten in
place, not atomically, on every call). This reads it every ``--period`` and reports
``autoscaler_wants`` with ``{node id: node type}`` of every worker, only when a read parses,
differs from the last report, and the next read agrees (two equal reads: never act on a
half-written file). The host creates and removes containers from these reports
(chaos.cluster.autoscaler) and writes ``DIR/status.json`` back itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from raychaos_agent import emit

#: Ray's tag names (ray.autoscaler.tags): the node's kind, and its type in the config.
KIND_TAG = "ray-node-type"
HEAD_KIND = "head"
TYPE_TAG = "ray-user-node-type"


def wanted(path: str) -> dict[str, str] | None:
    """``{node id: node type}`` of every worker the provider holds, or None if unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            nodes: Any = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(nodes, dict):
        return None
    out: dict[str, str] = {}
    for node_id, node in nodes.items():
        tags = node.get("tags", {}) if isinstance(node, dict) else {}
        if tags.get(KIND_TAG) == HEAD_KIND:
            continue
        out[str(node_id)] = str(tags.get(TYPE_TAG, ""))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="raychaos_agent.autoscale")
    parser.add_argument("dir")
    parser.add_argument("--period", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args(argv)
    path = os.path.join(args.dir, "nodes.json")
    emit("started", pid=os.getpid())
    reported: dict[str, str] | None = None
    previous: dict[str, str] | None = None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        current = wanted(path)
        if current is not None and current == previous and current != reported:
            emit("autoscaler_wants", nodes=current)
            reported = current
        previous = current
        time.sleep(args.period)  # the polling period of a bounded watch
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
