"""Ray's own log lines as timestamps: when a raylet or the GCS says something happened.

Ray's clocks beat the harness's where the harness is slow to act (``ray stop`` needs seconds
to start on a loaded host), so some windows start at a log line rather than at the strike.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chaos.errors import ChaosError, CheckFailed
from chaos.spec.plan import RAY_LOGS
from chaos.steps import step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster


def first_logged(
    cluster: Cluster, node: str, needles: Sequence[str], log: str = "raylet.out"
) -> dict[str, float]:
    """Wall-clock time at which ``log`` on ``node`` (a glob in Ray's log directory) first
    logged each of ``needles``; needles never logged are left out. One exec for all of them.

    Ray stamps its C++ log lines in the container's local time (``[2026-12-02 17:23:51,744 I
    …``), so the container's own ``date`` converts the stamp.
    """
    parts = []
    for needle in needles:
        quoted = shlex.quote(needle)
        parts.append(
            f"line=$(grep -h -F -e {quoted} {RAY_LOGS}/{log} 2>/dev/null | head -n1); "
            f'[ -n "$line" ] && printf "%s\\t%s\\n" {quoted} '
            '"$(date -d "$(printf %s "$line" | cut -c2-24 | tr , .)" +%s.%N)"'
        )
    with step(f"read: when {node}'s {log} first logged {', '.join(map(repr, needles))}"):
        out = cluster.exec(node, ["sh", "-c", "; ".join(parts) + "; true"], timeout=30)
    if out.exit_code != 0:
        raise ChaosError(f"could not read {node}:{log}: {out.output[-300:]}")
    found = {}
    for line in out.output.splitlines():
        needle, _, when = line.partition("\t")
        if needle in needles and when:
            found[needle] = float(when)
    return found


def logged_at(cluster: Cluster, node: str, needle: str, log: str = "raylet.out") -> float:
    """Wall-clock time of the first line of ``log`` on ``node`` that contains ``needle``."""
    seen = first_logged(cluster, node, [needle], log)
    if needle not in seen:
        raise CheckFailed(f"{node}:{log} has no {needle!r} line")
    return seen[needle]
