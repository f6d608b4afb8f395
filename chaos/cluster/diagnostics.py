"""What a person reads when a cluster misbehaves: ``ray status`` and the tails of its logs.

Diagnostics never raise: what could not be had is said in the text instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.spec.plan import RAY_LOGS

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster


def ray_status(cluster: Cluster, timeout: float = 30) -> str:
    """``ray status`` as the head sees it (or why it could not be had)."""
    try:
        return cluster.exec(cluster.head.name, ["ray", "status"], timeout=timeout).output
    except Exception as exc:  # noqa: BLE001 - diagnostics must not raise
        return f"(ray status unavailable: {exc})"


def logs(cluster: Cluster, node: str, tail: int = 40) -> str:
    """The host's own log (``ray start`` output) plus the tails of Ray's session logs."""
    target = cluster.node(node)
    parts: list[str] = []
    try:
        parts.append(cluster.backend.logs(node, tail=tail))
    except Exception as exc:  # noqa: BLE001 - diagnostics must not raise
        parts.append(f"(host log unavailable: {exc})")
    if target.role != "redis":
        script = f"tail -n {tail} {RAY_LOGS}/raylet.out {RAY_LOGS}/gcs_server.out 2>/dev/null"
        try:
            parts.append(cluster.exec(node, ["sh", "-c", script], timeout=15).output)
        except Exception as exc:  # noqa: BLE001 - diagnostics must not raise
            parts.append(f"(Ray logs unavailable: {exc})")
    return "\n".join(parts)
