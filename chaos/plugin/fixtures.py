"""The raychaos fixtures: settings, engines, clusters, faults and the experiment kit.

Thin by design (pytest-xdist's shape): the work lives in the role packages, in
:mod:`chaos.plugin.factory` and in :func:`chaos.experiment.run_experiment`, and heavy imports
(docker) happen inside fixtures, so ``pytest --help`` works without a daemon. A good guest:
nothing connects to Docker, sweeps or installs a signal handler until a collected test uses
one of these. Each is small and overridable: override ``cluster_spec`` to change what
``ray_cluster`` boots, ``raychaos_workload_paths`` to ship other workloads, or call
``ray_cluster_factory`` for several clusters.

Several Docker engines (``--raychaos-docker-host``, repeatable): each xdist worker boots on
one of them (worker ``gwN`` on engine ``N mod count``, :mod:`chaos.backends.docker.engines`);
a test whose engine stops answering ends broken with one ``EngineLost`` line naming it, and
the worker moves on to an engine that answers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chaos import labels
from chaos.errors import ObserverGap
from chaos.plugin import images
from chaos.plugin.engines import engine_lost_already
from chaos.plugin.factory import ClusterFactory
from chaos.plugin.interrupts import INTERRUPTED, install_handlers
from chaos.plugin.items import evidence_dir, failed, spec_from_marker
from chaos.plugin.keys import (
    ENGINE_KEY,
    EXPERIMENT_KEY,
    FACTORY_KEY,
    RUN_ID_KEY,
    SETTINGS_KEY,
    TEARDOWN_FAILED,
)
from chaos.plugin.settings import Settings
from chaos.plugin.terminal import say

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster
    from chaos.experiment import Experiment
    from chaos.nemesis.nemesis import Nemesis
    from chaos.plugin.backend import DockerClient, EnginePool, EngineUse, ImageBuilder
    from chaos.spec.topology import ClusterSpec


@pytest.fixture(scope="session")
def raychaos_settings(pytestconfig: pytest.Config) -> Settings:
    """Effective settings (marker > CLI > env > ini)."""
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def raychaos_identity(pytestconfig: pytest.Config) -> labels.RunIdentity:
    """Run id (shared by all xdist workers) and this worker's id: the labels of our objects."""
    return labels.RunIdentity(
        run_id=pytestconfig.stash[RUN_ID_KEY],
        worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
    )


@pytest.fixture(scope="session")
def raychaos_engines(
    pytestconfig: pytest.Config, raychaos_settings: Settings
) -> Iterator[EnginePool]:
    """The run's Docker engines as this process uses them (``--raychaos-docker-host``; one:
    DOCKER_HOST or the local socket). Nothing connects until a fixture needs an engine.

    The first use of an engine in a process is when raychaos wakes up there: it starts a
    reaper for it (which removes the process's objects on that engine if the process dies,
    whatever the signal) and removes what dead runs left behind on it; the first use of any
    makes SIGINT/SIGTERM unwind quickly, so teardown still runs.
    """
    from chaos.plugin.backend import BuildSettings, EnginePool, engine_urls, reaper, sweep

    install_handlers()
    run_id = pytestconfig.stash[RUN_ID_KEY]
    urls = engine_urls(raychaos_settings.docker_hosts)

    def wake(engine: EngineUse) -> None:
        where = f" on {engine.name}" if len(urls) > 1 else ""
        if reaper.start(run_id=run_id, engine=engine.url) is None:
            say(
                f"raychaos: could not start a reaper for this process{where} (see /proc and the "
                "cache directory); if it is killed, only the next run's sweep removes its clusters"
            )
        report = sweep(engine.client, engine=engine.url)
        if report.removed or report.failed:
            say(f"raychaos: sweep{where} {report}")

    pool = EnginePool(
        urls,
        build=BuildSettings(base_image=raychaos_settings.base_image or None),
        progress=lambda line: say(f"[raychaos] {line}"),
        say=say,
        wake=wake,
    )
    yield pool
    if problem := reaper.check():
        say(f"raychaos: {problem}")
    pool.close()


@pytest.fixture(scope="session")
def docker_client(raychaos_engines: EnginePool) -> DockerClient:
    """A Docker client for this process's engine: DOCKER_HOST (or the local socket), or with
    several engines the one of its xdist worker. (After that engine was lost, the clusters of
    later tests run elsewhere: ``cluster.backend.client`` is always theirs.)"""
    return raychaos_engines.use(raychaos_engines.planned).client


@pytest.fixture(scope="session")
def image_builder(
    docker_client: DockerClient, raychaos_settings: Settings, raychaos_engines: EnginePool
) -> ImageBuilder:
    """Builds Ray images on first use, once per session across xdist workers (or carries them
    from another engine of the run)."""
    from chaos.plugin.backend import BuildSettings, ImageBuilder

    engine = raychaos_engines.owner_of(docker_client)
    if engine is not None:
        return engine.builder
    return ImageBuilder(  # a docker_client of the user's own
        docker_client,
        BuildSettings(base_image=raychaos_settings.base_image or None),
        progress=lambda line: say(f"[raychaos] {line}"),
    )


@pytest.fixture
def raychaos_workload_paths(
    pytestconfig: pytest.Config, raychaos_settings: Settings
) -> tuple[Path, ...]:
    """Workload packages shipped into every node: ini ``raychaos_workloads``, else
    ``experiments/workloads`` under the rootdir. A suite's conftest may override it."""
    if raychaos_settings.workload_paths:
        return raychaos_settings.workload_paths
    default = pytestconfig.rootpath / "experiments" / "workloads"
    return (default,) if default.is_dir() else ()


@pytest.fixture
def raychaos_ray_version(pytestconfig: pytest.Config) -> str:
    """The Ray release this test runs against (parametrised: one test per release)."""
    return images.run_versions(pytestconfig)[-1]


@pytest.fixture
def cluster_spec(
    request: pytest.FixtureRequest, raychaos_settings: Settings, raychaos_ray_version: str
) -> ClusterSpec:
    """What ``ray_cluster`` boots: the ``cluster`` marker over the session settings."""
    return spec_from_marker(
        request.node.get_closest_marker("cluster"), raychaos_settings, raychaos_ray_version
    )


@pytest.fixture
def ray_cluster_factory(
    request: pytest.FixtureRequest,
    raychaos_engines: EnginePool,
    raychaos_identity: labels.RunIdentity,
    raychaos_settings: Settings,
    raychaos_workload_paths: tuple[Path, ...],
) -> Iterator[ClusterFactory]:
    """Call it to boot clusters (custom specs, several per test); all are removed afterwards.

    They boot on this process's engine while it answers, else on the next engine that does.
    """
    engine = raychaos_engines.pick()
    request.node.stash[ENGINE_KEY] = engine
    factory = ClusterFactory(
        request,
        engine.client,
        raychaos_identity,
        engine.builder,
        raychaos_settings,
        raychaos_workload_paths,
        engine=engine,
    )
    request.node.stash[FACTORY_KEY] = factory
    yield factory
    factory.teardown(failed(request.node))


@pytest.fixture
def ray_cluster(ray_cluster_factory: ClusterFactory, cluster_spec: ClusterSpec) -> Cluster:
    """A ready Ray cluster as the test's ``cluster`` marker (or ``cluster_spec``) describes."""
    return ray_cluster_factory(cluster_spec)


@pytest.fixture
def nemesis(request: pytest.FixtureRequest, ray_cluster: Cluster) -> Iterator[Nemesis]:
    """Faults on ``ray_cluster``; every fault still active is healed at teardown. One per
    test: the ``experiment`` fixture uses this same instance."""
    from chaos.nemesis.nemesis import Nemesis

    faults = Nemesis(ray_cluster)
    yield faults
    if not engine_lost_already(request.node):  # nothing to heal on an engine that is gone
        faults.heal_all()


@pytest.fixture
def experiment(
    request: pytest.FixtureRequest, ray_cluster: Cluster, nemesis: Nemesis
) -> Iterator[Experiment]:
    """Cluster + nemesis + observer; afterwards heal, check INV-01/INV-02, write evidence:
    :func:`chaos.experiment.run_experiment`, steered by this test's outcome."""
    from chaos.experiment import Callbacks, run_experiment
    from chaos.report.timeline import write_evidence

    node = request.node

    def teardown_failed(_: BaseException) -> None:
        node.stash[TEARDOWN_FAILED] = True
        factory = node.stash.get(FACTORY_KEY, None)
        if factory is not None and not INTERRUPTED.is_set():
            factory.attach_logs("a postcondition or heal failed")

    callbacks = Callbacks(
        # Interrupted: the clusters go now. Engine lost: nothing to heal or check there.
        abandoned=lambda: INTERRUPTED.is_set() or engine_lost_already(node),
        failed=lambda: failed(node),
        checking=_label_postconditions,
        teardown_failed=teardown_failed,
        say=say,
    )
    running = run_experiment(
        ray_cluster,
        nemesis=nemesis,
        evidence_dir=evidence_dir(request.config),
        test_id=node.nodeid,
        write_evidence=write_evidence,
        callbacks=callbacks,
    )
    with contextlib.ExitStack() as stack:
        try:
            kit = stack.enter_context(running)
        except ObserverGap as exc:
            pytest.fail(str(exc), pytrace=False)
        node.stash[EXPERIMENT_KEY] = kit
        yield kit


def _label_postconditions(claims: Sequence[str]) -> None:
    """Claim labels of the postconditions checked at teardown (the test's own claims are
    added by :mod:`chaos.plugin.allure` at the end of set-up)."""
    from chaos.plugin.allure_labels import label_claims

    try:
        label_claims(claims)
    except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
        say(f"raychaos: could not label postconditions: {exc!r}")
