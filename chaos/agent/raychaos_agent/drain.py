"""Drain requests and the nodes draining: ``python -m raychaos_agent.drain ADDRESS CMD …``.

``request NODE_ID REASON MESSAGE DEADLINE_S`` asks the GCS to drain a node (what ``ray
drain-node`` does) and prints ``{"accepted": …, "rejection": …, "deadline_ms": …}``: a
rejection is an answer, not an error. ``list`` prints ``{node id hex: deadline ms}`` of the
nodes draining now.

Ray offers these only through ``ray._raylet.GcsClient`` (``drain_node``,
``get_draining_nodes``) and ``ray.core.generated.autoscaler_pb2``: this module is the one place
raychaos touches them. The node id goes as hex: ``node.py`` notes that a binary id reads as nil
and the GCS accepts it without draining anything.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    address, command, *rest = argv
    from ray._raylet import GcsClient

    client = GcsClient(address=address)
    if command == "list":
        draining = client.get_draining_nodes()
        print(json.dumps({_hex(k): int(v) for k, v in draining.items()}))
        return 0
    if command == "request":
        node_id, reason, message, deadline_s = rest
        from ray.core.generated import autoscaler_pb2

        deadline_ms = int((time.time() + float(deadline_s)) * 1000) if float(deadline_s) else 0
        accepted, rejection = client.drain_node(
            node_id, getattr(autoscaler_pb2, reason), message, deadline_ms
        )
        print(
            json.dumps(
                {
                    "accepted": bool(accepted),
                    "rejection": rejection or "",
                    "deadline_ms": deadline_ms,
                }
            )
        )
        return 0
    print(f"unknown command {command!r}: expected list or request", file=sys.stderr)
    return 2


def _hex(node_id: object) -> str:
    return node_id.hex() if isinstance(node_id, bytes) else str(node_id)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
