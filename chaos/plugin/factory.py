"""The clusters of one test: booted through the ``ray_cluster_factory`` fixture, removed after.

Kept out of the fixtures so they stay thin (pytest-docker's "context manager first, thin
fixture second"); boots on the test's engine through its boot slots.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos.errors import ChaosError
from chaos.plugin.boot_ahead import BOOT_AHEAD, eligible
from chaos.plugin.interrupts import INTERRUPTED
from chaos.plugin.items import spec_from_marker, version_of
from chaos.plugin.results import timing
from chaos.plugin.terminal import say
from chaos.spec.topology import ClusterSpec, group_names
from chaos.steps import mark, seconds, short, step

if TYPE_CHECKING:
    from chaos import labels
    from chaos.backends.base import Engine
    from chaos.cluster.cluster import Cluster
    from chaos.plugin.backend import DockerClient, ImageBuilder
    from chaos.plugin.settings import Settings

_TAGS = itertools.count(1)


def describe_spec(spec: ClusterSpec) -> str:
    """A cluster as a report says it: "head + 3 workers + driver, Ray 2.60.0, GCS FT redis"."""
    workers = sum(len(group_names(g)) for g in spec.workers)
    parts = ["head", f"{workers} worker{'s' if workers != 1 else ''}" if workers else ""]
    parts += ["driver"] if spec.driver else []
    extra = f", GCS FT {spec.gcs_ft}" if spec.gcs_ft != "none" else ""
    image = f", image {spec.image}" if spec.image else ""
    return f"{' + '.join(p for p in parts if p)}, Ray {spec.ray_version}{extra}{image}"


class TeardownError(ChaosError):
    """Removing several clusters of one test failed: each cluster and its one-line reason."""

    def __init__(self, errors: Sequence[tuple[str, Exception]]) -> None:
        self.errors = list(errors)
        each = "; ".join(f"{key}: {_one_line(exc)}" for key, exc in self.errors)
        super().__init__(
            f"removing {len(self.errors)} clusters failed: {each}",
            hint="what is left is the reaper's and the next run's sweep's (`raychaos sweep`); "
            "check with `docker ps -a --filter label=raychaos.run`",
        )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0][:300]
    return first if isinstance(exc, ChaosError) else f"{type(exc).__name__}: {first}"


class ClusterFactory:
    """Boots clusters for one test and removes them afterwards (unless kept for a failure).

    With ``engine`` (a run spread over several engines) its boots take that engine's boot
    slots — ``--raychaos-boot-slots``, else one per two of the engine's CPUs, keyed by its ID —
    and a cluster on an engine that stopped answering is left to the reaper and the next
    run's sweep instead of failing teardown a second time.
    """

    def __init__(
        self,
        request: pytest.FixtureRequest,
        client: DockerClient,
        identity: labels.RunIdentity,
        builder: ImageBuilder,
        settings: Settings,
        workload_paths: Sequence[Path],
        engine: Engine | None = None,
    ) -> None:
        self.request = request
        self.client = client
        self.identity = identity
        self.builder = builder
        self.settings = settings
        self.workload_paths = tuple(workload_paths)
        self.engine = engine
        self.clusters: list[Cluster] = []
        #: Clusters whose node logs are in the report already (attached once per cluster).
        self._logs_attached: set[int] = set()

    def __call__(self, spec: ClusterSpec | None = None, **fields: Any) -> Cluster:
        """Boot ``spec`` (default: the test's ``cluster`` marker) with ``fields`` replaced.

        The test's first cluster may have been booted while the previous test ran
        (:mod:`chaos.plugin.boot_ahead`): it is taken when it is this spec and still ready.
        """
        if spec is None:
            spec = spec_from_marker(
                self.request.node.get_closest_marker("cluster"),
                self.settings,
                version_of(self.request.node),
            )
        if fields:
            spec = spec.replace(**fields)
        named = "" if spec.name == "cluster" else f" {spec.name}"
        title = f"boot: cluster{named} ({describe_spec(spec)}) ≤ {seconds(spec.boot_timeout_s)}"
        if not self.clusters and BOOT_AHEAD.pending is not None:
            waited = time.monotonic()
            with step(f"{title}: booted ahead during the previous test"):
                cluster, why = BOOT_AHEAD.take(self.request.node.nodeid, spec)
                if cluster is None:
                    mark(short(f"not used, booting now: {why}"))
            if cluster is not None:
                self.clusters.append(cluster)
                timing.adopted(cluster, time.monotonic() - waited)
                self.cpu_point("ready", [cluster])
                return cluster
        from chaos.cluster.boot_slots import engine_scope

        cluster = self.new_cluster(spec, self.request.node.nodeid)
        self.clusters.append(cluster)
        with step(title), engine_scope(self.engine_id):
            cluster.start()
        self.cpu_point("ready", [cluster])
        return cluster

    @property
    def engine_id(self) -> str:
        """Whose boot slots this factory's boots take ("" = this machine's)."""
        return self.engine.id if self.engine is not None else ""

    def new_cluster(self, spec: ClusterSpec, test_id: str) -> Cluster:
        """A cluster of ``spec`` on this factory's engine, labelled for ``test_id``, not
        started (no Docker object exists yet)."""
        from chaos.cluster.boot_slots import slots_for_cpus
        from chaos.cluster.cluster import Cluster
        from chaos.plugin.backend import docker_backend

        backend = docker_backend(
            spec.name,
            client=self.client,
            builder=self.builder,
            identity=self.identity,
            tag=f"t{next(_TAGS)}",
            test_id=test_id,
            workload_paths=self.workload_paths,
        )
        slots = self.settings.boot_slots or None
        if self.engine is not None:
            slots = slots or slots_for_cpus(self.engine.cpus or 2)
        return Cluster(spec, backend, boot_slots=slots)

    def boot_ahead(self, item: pytest.Item | None) -> None:
        """Start booting the cluster of ``item`` (the next test) if it can be booted ahead."""
        if not self.settings.boot_ahead or INTERRUPTED.is_set() or not eligible(item):
            return
        if self.engine is not None and self.engine.lost:
            return
        if len(self.settings.docker_hosts) > 1:
            # Spread over engines, a test may boot on another engine than the one before (a
            # lost engine's workers move): each test boots at its own set-up there.
            return
        if item is None:  # the last test: nothing comes after it
            return
        try:
            spec = spec_from_marker(
                item.get_closest_marker("cluster"), self.settings, version_of(item)
            )
        except Exception:  # noqa: BLE001 - a bad marker is the next test's error, at its set-up
            return
        BOOT_AHEAD.start(item.nodeid, spec, self.new_cluster(spec, item.nodeid), self.engine_id)

    def cpu_point(self, point: str, clusters: Sequence[Cluster] | None = None) -> None:
        """Each node's container CPU-seconds at ``point`` (:data:`chaos.report.timing.CPU_POINTS`)
        for the timing record: one exec per node, concurrently; never fails the test."""
        if INTERRUPTED.is_set() or (self.engine is not None and self.engine.lost):
            return
        from chaos.cluster.cpu import cluster_cpu_seconds

        for cluster in self.clusters if clusters is None else clusters:
            try:
                if cluster.nodes:
                    timing.cpu_sample(cluster, point, cluster_cpu_seconds(cluster))
            except Exception:  # noqa: BLE001, S112 - a benchmark's input, never a verdict
                continue

    def attach_logs(self, why: str) -> None:
        """Every node's log of every cluster into the report (once per cluster)."""
        from chaos.plugin.results.nodelogs import attach_node_logs

        for cluster in self.clusters:
            if id(cluster) not in self._logs_attached and cluster.nodes:
                self._logs_attached.add(id(cluster))
                attach_node_logs(cluster, why)

    def teardown(self, failed: bool) -> None:
        """Remove every cluster of the test (keep those of a failed test when asked). A cluster
        whose removal fails, for whatever reason, never stops the others from going; one
        failure is raised as it is, several as one :class:`TeardownError` naming each."""
        from chaos.plugin.backend import keep

        errors: list[tuple[str, Exception]] = []
        if self.engine is not None and self.engine.lost:
            keys = [str(getattr(c.backend, "key", "?")) for c in self.clusters]
            if keys:
                say(
                    f"raychaos: engine {self.engine.name} is lost: left {', '.join(keys)} to "
                    "the reaper and the next run's sweep"
                )
            return
        if failed and not INTERRUPTED.is_set():  # interrupted: the clusters go at once
            self.attach_logs("the test failed")
        for cluster in reversed(self.clusters):
            key = getattr(cluster.backend, "key", None)
            if failed and self.settings.keep and key:
                engine = self._elsewhere()
                keep(key, self.engine.url if self.engine is not None else "")
                hints = "\n".join(
                    f"  {line}" for line in cluster.backend.inspect_hints(cluster.head.name)
                )
                where = f"  (on engine {engine}: export DOCKER_HOST={engine} first)\n"
                say(
                    f"raychaos: kept cluster {key} of failed {self.request.node.nodeid}:\n"
                    f"{where if engine else ''}{hints}\n"
                    f"  remove with: raychaos sweep --cluster {key}"
                    "  (every kept cluster: raychaos sweep --kept)"
                )
                continue
            self.cpu_point("removal", [cluster])
            try:
                with timing.removing(cluster):
                    cluster.stop()
            except Exception as exc:  # noqa: BLE001 - every cluster goes; all are reported below
                errors.append((str(key or cluster.spec.name), exc))
        timing.attach(self.clusters)  # boot, slot queue and teardown seconds (bench suite)
        if len(errors) == 1:
            raise errors[0][1]
        if errors:
            raise TeardownError(errors)

    def _elsewhere(self) -> str:
        """The engine's name when it is not the one DOCKER_HOST names ("" when it is)."""
        if self.engine is None:
            return ""
        from chaos.plugin.backend import default_url

        return "" if self.engine.url == default_url() else self.engine.name
