"""Print one State API listing as JSON: ``python -m raychaos_agent.state KIND DASHBOARD [k=v …]``.

KIND is tasks, actors, nodes, objects, workers or placement_groups; ``k=v`` are equality
filters. Used by the host to resolve fault targets by Ray role (the node running a task, the
node holding an actor, the owner of an object).
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    kind, address, *pairs = argv
    from ray.util import state

    lister = getattr(state, f"list_{kind}")
    filters = [(k, "=", v) for k, _, v in (p.partition("=") for p in pairs)]
    rows = lister(
        address=address,
        filters=filters or None,
        limit=10000,
        detail=True,
        raise_on_missing_output=False,
        timeout=10,
    )
    out = []
    for row in rows:
        data = row.__dict__ if hasattr(row, "__dict__") else dict(row)
        out.append(
            {
                k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
                for k, v in data.items()
            }
        )
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
