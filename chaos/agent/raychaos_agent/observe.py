"""Sample node, actor and placement-group state through Ray's State API; report transitions.

    python -m raychaos_agent.observe --dashboard http://HEAD:8265 [--period 0.5]
        [--heartbeat 1.0] [--query-timeout 5] [--actors] [--pgs] [--timeout S]

Runs on the driver node (or the head) and talks to the head's dashboard over the cluster
network, so it needs no driver connection and survives a dead GCS or head: while the State API
fails it reports ``unobservable`` and keeps trying. Transitions alone cannot tell a quiet
cluster from a stalled observer, so a sample that answered is also reported as ``sampled``, at
most once per ``--heartbeat`` seconds (the host judges gaps from these: chaos.observer.gaps).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from raychaos_agent import emit


def _fields(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name, None)
        out[name] = value if value is None or isinstance(value, int | float | bool) else str(value)
    return out


#: ``end_time_ms``: when the GCS marked the node DEAD (0 while alive), on the host's clock.
NODE_FIELDS = (
    "node_id",
    "node_ip",
    "is_head_node",
    "state",
    "state_message",
    "node_name",
    "end_time_ms",
)
ACTOR_FIELDS = (
    "actor_id",
    "class_name",
    "name",
    "state",
    "node_id",
    "pid",
    "num_restarts",
    "death_cause",
    "ray_namespace",
)
PG_FIELDS = ("placement_group_id", "name", "state")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="raychaos_agent.observe")
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--period", type=float, default=0.5)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    # Whole seconds: the dashboard reads the State API's timeout as an int.
    parser.add_argument("--query-timeout", type=int, default=5)
    parser.add_argument("--actors", action="store_true")
    parser.add_argument("--pgs", action="store_true")
    parser.add_argument("--timeout", type=float, default=0.0, help="0 runs until killed")
    args = parser.parse_args(argv)

    from ray.util.state import list_actors, list_nodes, list_placement_groups

    known: dict[tuple[str, str], dict[str, Any]] = {}
    observable: bool | None = None
    deadline = time.monotonic() + args.timeout if args.timeout else None
    queries = 1 + int(args.actors) + int(args.pgs)
    emit(
        "observer_started",
        # The host stops this process by its PID (an exec cannot be killed through the API).
        pid=os.getpid(),
        dashboard=args.dashboard,
        period=args.period,
        heartbeat=args.heartbeat,
        queries=queries,
        query_timeout=args.query_timeout,
    )
    last_heartbeat: float | None = None

    def track(kind: str, key: str, record: dict[str, Any]) -> None:
        previous = known.get((kind, key))
        if previous != record:
            known[(kind, key)] = record
            emit(f"{kind}_state", **record)

    while deadline is None or time.monotonic() < deadline:
        started = time.monotonic()
        try:
            query = {
                "address": args.dashboard,
                "limit": 10000,
                "timeout": args.query_timeout,
                "raise_on_missing_output": False,
            }
            nodes = [_fields(n, NODE_FIELDS) for n in list_nodes(detail=True, **query)]
            actors = (
                [_fields(a, ACTOR_FIELDS) for a in list_actors(detail=True, **query)]
                if args.actors
                else []
            )
            pgs = (
                [_fields(p, PG_FIELDS) for p in list_placement_groups(detail=True, **query)]
                if args.pgs
                else []
            )
        except Exception as exc:  # noqa: BLE001 - GCS or head down: that is the observation
            if observable is not False:
                emit("unobservable", error=f"{type(exc).__name__}: {str(exc)[:300]}")
            observable = False
        else:
            if observable is not True:
                emit("observable")
            observable = True
            for node in nodes:
                track("node", str(node["node_id"]), node)
            for actor in actors:
                track("actor", str(actor["actor_id"]), actor)
            for pg in pgs:
                track("pg", str(pg["placement_group_id"]), pg)
            now = time.monotonic()
            if last_heartbeat is None or now - last_heartbeat >= args.heartbeat:
                # After the transitions of this sample: once it arrives, they have too.
                emit("sampled", took_s=round(now - started, 3), nodes=len(nodes))
                last_heartbeat = now
        time.sleep(max(0.0, args.period - (time.monotonic() - started)))
    emit("observer_timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
