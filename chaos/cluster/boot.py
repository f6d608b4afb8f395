"""Booting a cluster: everything that can fail without Docker objects first, then the plan.

Order matters for bad input: the engine's limits and every image are checked (and built on
first use) before the network, a volume or a host exists, so a wrong image or a CPU limit
the engine cannot give fails with one line and nothing to clean up.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from chaos.cluster.boot_slots import boot_slot
from chaos.errors import SpecError
from chaos.history import Kind, Source
from chaos.resources import default_cache_dir
from chaos.spec.plan import ClusterPlan, plan_cluster
from chaos.spec.topology import DEFAULT_PYTHON

if TYPE_CHECKING:
    from chaos.backends.base import Backend
    from chaos.cluster.node import Node
    from chaos.history import History
    from chaos.spec.topology import ClusterSpec, NodeSpec


def image_for(spec: ClusterSpec, backend: Backend, node: NodeSpec) -> tuple[str, str]:
    """(Ray version, image) of a node: a given image must exist (a team's own is derived into a
    node image and its Ray version is the one its probe found); otherwise one is built."""
    version = node.ray_version or spec.ray_version
    # A node of its own release (version skew) in a cluster of a given image: that release's
    # image, not the cluster's.
    given = node.image or (None if node.ray_version else spec.image)
    if given:
        probe = backend.node_image(given)
        return (version, given) if probe is None else (probe.ray_version, probe.node_image)
    return version, backend.ensure_image(version, spec.python)


def check_engine(spec: ClusterSpec, backend: Backend) -> None:
    """What only the engine can tell: its CPUs bound every cgroup CPU limit."""
    cpus = backend.cpus()
    groups = [("head", spec.head), *((f"workers[{i}]", g) for i, g in enumerate(spec.workers))]
    for where, group in groups:
        if group.cpu_limit is not None and cpus and group.cpu_limit > cpus:
            raise SpecError(
                f"{where}.cpu_limit",
                f"at most the engine's {cpus} CPUs",
                group.cpu_limit,
                hint="lower cpu_limit, or run on a bigger Docker host",
            )


def prepare(spec: ClusterSpec, backend: Backend) -> ClusterPlan:
    """Check, resolve images, then create the network (and volume) and plan the cluster."""
    check_engine(spec, backend)
    images = {g.name: image_for(spec, backend, g) for g in (spec.head, *spec.workers)}
    redis = spec.gcs_ft == "redis"
    # Redis runs from raychaos's own base image, never a given one: a team's Ray image need
    # not carry Redis (in production it is a separate service) nor Debian's `redis` user.
    base = backend.ensure_base_image(DEFAULT_PYTHON) if redis else None
    subnet = backend.create_network()
    return plan_cluster(
        spec,
        subnet=subnet,
        image_for=lambda g: images.get(g.name) or image_for(spec, backend, g),
        base_image=base,
        redis_password=secrets.token_hex(12) if redis else None,
        gcs_volume=backend.create_volume("gcs") if spec.gcs_ft == "rocksdb" else None,
    )


def start(
    plan: ClusterPlan,
    nodes: Sequence[Node],
    backend: Backend,
    history: History,
    *,
    slots: int,
    wait_ready: Callable[[], None],
) -> float:
    """Create every host of ``nodes`` and ``wait_ready``; seconds spent booting.

    The caller passes its own readiness wait, so booting needs no cluster object of its own.
    """
    started = time.monotonic()
    history.record(Source.HARNESS, Kind.NETWORK_CREATED, subnet=str(plan.subnet))
    for node in nodes:
        if node.role == "redis":  # Redis first: the head's GCS connects to it at once
            backend.start_node(node.plan)
    with boot_slot(default_cache_dir() / "boot-slots", slots) as queued:
        history.record(Source.HARNESS, Kind.BOOT_SLOT, queued_s=round(queued, 2))
        # Head and workers boot together: a worker's `ray start` waits for the GCS itself.
        ray = [n.plan for n in nodes if n.role != "redis"]
        with ThreadPoolExecutor(max_workers=min(8, len(ray))) as pool:
            list(pool.map(backend.start_node, ray))
        history.record(Source.HARNESS, Kind.CONTAINERS_STARTED, count=len(ray))
        wait_ready()
    return time.monotonic() - started - queued
