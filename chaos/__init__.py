"""raychaos: chaos and fault-tolerance experiments against real Ray clusters.

The public API for code outside pytest and for other repositories::

    from chaos import Cluster, ClusterSpec, NodeSpec, ChaosError, SpecError

    with Cluster(ClusterSpec(workers=2)) as cluster:
        print(cluster.run("workloads.basics:node_ids_of_pinned_tasks", nodes=["head"]).result())

Checks live in :mod:`chaos.check`, faults in :mod:`chaos.nemesis`. ``Cluster`` is imported on
first use, so loading the pytest plugin stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, SpecError
from chaos.spec import ClusterSpec, NodeSpec

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

__all__ = ["ChaosError", "Cluster", "ClusterSpec", "NodeSpec", "SpecError"]


def __getattr__(name: str) -> Any:
    if name == "Cluster":
        from chaos.cluster.cluster import Cluster

        return Cluster
    raise AttributeError(f"module 'chaos' has no attribute {name!r}")
