"""The model: what a cluster, its layout, a Ray release and an image are.

Specs are validated here, before any engine is touched, and this layer imports neither
docker-py nor Ray, so the plugin, the CLI and the report can read and check a spec without
booting anything. Backends and the cluster runtime build on it; it never imports them.
"""

from __future__ import annotations

from chaos.spec.image_contract import ImageProbe
from chaos.spec.plan import ClusterPlan, NodePlan, plan_cluster
from chaos.spec.topology import (
    DEFAULT_PYTHON,
    DEFAULT_RAY_VERSION,
    ClusterSpec,
    GcsFt,
    NodeSpec,
    load_topology,
    topologies_dir,
)

__all__ = [
    "DEFAULT_PYTHON",
    "DEFAULT_RAY_VERSION",
    "ClusterPlan",
    "ClusterSpec",
    "GcsFt",
    "ImageProbe",
    "NodePlan",
    "NodeSpec",
    "load_topology",
    "plan_cluster",
    "topologies_dir",
]
