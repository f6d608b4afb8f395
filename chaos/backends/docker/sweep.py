"""Remove Docker objects whose run is gone (a SIGKILLed pytest, a crashed xdist worker).

An object belongs to a live run while the process that created it runs (PID and start time
on this host). Objects from other hosts are left alone: we cannot see their owners. Kept
clusters (``--raychaos-keep``) survive sweeps until ``raychaos sweep --all``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chaos import labels
from chaos.resources import default_cache_dir

if TYPE_CHECKING:
    import docker


def kept_dir() -> Path:
    """Markers of clusters kept for inspection (labels cannot be added to a live container)."""
    return default_cache_dir() / "kept"


def keep(cluster_key: str) -> None:
    kept_dir().mkdir(parents=True, exist_ok=True)
    (kept_dir() / cluster_key).touch()


@dataclass
class SweepReport:
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        text = f"removed {len(self.removed)} leftover object(s)"
        if self.failed:
            text += f"; could not remove: {', '.join(self.failed)}"
        return text


def _dead(obj_labels: dict[str, str], everything: bool, kept: set[str]) -> bool:
    if everything:
        return True
    if obj_labels.get(labels.CLUSTER) in kept:
        return False
    alive = labels.owner_alive(
        obj_labels.get(labels.OWNER_PID, ""),
        obj_labels.get(labels.OWNER_START, ""),
        obj_labels.get(labels.OWNER_HOST, ""),
        obj_labels.get(labels.OWNER_PIDNS, ""),
    )
    return alive is False


def sweep(client: docker.DockerClient, *, everything: bool = False) -> SweepReport:
    """Remove containers, then networks, then volumes of dead runs (``everything``: all ours)."""
    report = SweepReport()
    kept = {p.name for p in kept_dir().glob("*")} if kept_dir().is_dir() else set()
    selector: dict[str, str | list[str] | bool] = {"label": labels.RUN}
    # ignore_removed: docker-py inspects each listed container; a parallel run may remove one.
    for container in client.containers.list(all=True, ignore_removed=True, filters=selector):
        if _dead(container.labels, everything, kept):
            try:
                container.remove(force=True, v=True)
                report.removed.append(f"container {container.name}")
            except Exception as exc:  # noqa: BLE001 - sweep the rest regardless
                report.failed.append(f"container {container.name} ({exc})")
    for network in client.networks.list(filters=selector):
        if _dead(network.attrs.get("Labels") or {}, everything, kept):
            try:
                network.remove()
                report.removed.append(f"network {network.name}")
            except Exception as exc:  # noqa: BLE001 - sweep the rest regardless
                report.failed.append(f"network {network.name} ({exc})")
    for volume in client.volumes.list(filters=selector):
        if _dead(volume.attrs.get("Labels") or {}, everything, kept):
            try:
                volume.remove(force=True)
                report.removed.append(f"volume {volume.name}")
            except Exception as exc:  # noqa: BLE001 - sweep the rest regardless
                report.failed.append(f"volume {volume.name} ({exc})")
    if everything and kept_dir().is_dir():
        for marker in kept_dir().glob("*"):
            marker.unlink(missing_ok=True)
    return report
