"""Ray's own log lines as timestamps: when a raylet or the GCS says something happened.

Ray's clocks beat the harness's where the harness is slow to act (``ray stop`` needs seconds
to start on a loaded host), so some windows start at a log line rather than at the strike.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from chaos.cluster.plan import RAY_LOGS
from chaos.report.steps import step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster


def logged_at(cluster: Cluster, node: str, needle: str, log: str = "raylet.out") -> float:
    """Wall-clock time of the first line of ``log`` on ``node`` that contains ``needle``.

    Ray stamps its C++ log lines in the container's local time (``[2026-12-02 17:23:51,744 I
    …``), so the container's own ``date`` converts the stamp.
    """
    script = (
        f"line=$(grep -m1 -h -F -e {shlex.quote(needle)} {RAY_LOGS}/{log}) || exit 3; "
        'date -d "$(printf %s "$line" | cut -c2-24 | tr , .)" +%s.%N'
    )
    with step(f"read: when {node}'s {log} first logged {needle!r}"):
        out = cluster.exec(node, ["sh", "-c", script], timeout=30)
        assert out.exit_code == 0, f"{node}:{log} has no {needle!r} line: {out.output[-300:]}"
        return float(out.output.strip())
