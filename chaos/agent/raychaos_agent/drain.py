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
        print(json.dumps(_draining(client)))
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


def _draining(client: object) -> dict[str, int]:
    """``{node id hex: deadline ms}``. 2.60 has ``get_draining_nodes``; 2.59 does not, and
    there the autoscaler's cluster resource state (``get_cluster_resource_state``, what
    ``ray.autoscaler.v2.sdk`` reads) lists nodes whose status is DRAINING (deadline unknown:
    0)."""
    if hasattr(client, "get_draining_nodes"):
        return {_hex(k): int(v) for k, v in client.get_draining_nodes().items()}
    from ray.core.generated import autoscaler_pb2

    reply = autoscaler_pb2.GetClusterResourceStateReply()
    reply.ParseFromString(client.get_cluster_resource_state())
    draining = autoscaler_pb2.NodeStatus.Value("DRAINING")
    return {
        _hex(n.node_id): 0 for n in reply.cluster_resource_state.node_states if n.status == draining
    }


def _hex(node_id: object) -> str:
    return node_id.hex() if isinstance(node_id, bytes) else str(node_id)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
