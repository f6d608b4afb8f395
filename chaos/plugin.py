"""The raychaos pytest plugin (entry point ``pytest11``): options, markers, cluster fixtures.

Thin by design (pytest-xdist's shape): the work lives in the role packages and
:mod:`chaos.testkit`, and heavy imports (docker) happen inside fixtures, so ``pytest --help``
works without a daemon. A good guest: installed in a repository, it does nothing until a
collected test uses one of its fixtures or markers — no Docker connection, no sweep, no
signal handler. Fixtures are small and overridable: override ``cluster_spec`` to change what
``ray_cluster`` boots, ``raychaos_workload_paths`` to ship other workloads, or call
``ray_cluster_factory`` for several clusters.

Several Docker engines (``--raychaos-docker-host``, repeatable): each xdist worker boots on
one of them (worker ``gwN`` on engine ``N mod count``, :mod:`chaos.backends.docker.engines`);
a test whose engine stops answering ends broken with one ``EngineLost`` line naming it, and
the worker moves on to an engine that answers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chaos import boot_ahead_hooks, engine_hooks, image_hooks, labels, selection, trials
from chaos.engine_hooks import engine_lines, engine_lost_already
from chaos.errors import ChaosError, CheckFailed
from chaos.interrupts import INTERRUPTED, install_handlers
from chaos.keys import PHASE_REPORTS, RUN_ID_KEY, SETTINGS_KEY, USED_KEY
from chaos.settings import OPTIONS, SettingError, Settings, resolve
from chaos.steps import seconds, step
from chaos.testkit import (
    ENGINE_KEY,
    EXPERIMENT_KEY,
    FACTORY_KEY,
    TEARDOWN_FAILED,
    ClusterFactory,
    attach_config,
    ran_raychaos,
    say,
    spec_from_marker,
    uses_raychaos,
)

if TYPE_CHECKING:
    from chaos.backends.docker import DockerClient
    from chaos.backends.docker.engines import EnginePool, EngineUse
    from chaos.backends.docker.images import ImageBuilder
    from chaos.cluster.cluster import Cluster
    from chaos.experiment import Experiment
    from chaos.nemesis.nemesis import Nemesis
    from chaos.spec.topology import ClusterSpec

RUN_ID_INPUT = "raychaos_run_id"
VERSION_FIXTURE = "raychaos_ray_version"
WORKLOADS_INI = "raychaos_workloads"


# -- options and configuration ------------------------------------------------------------
@pytest.hookimpl
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("raychaos", "raychaos: Ray chaos experiments in Docker")
    for option in OPTIONS:
        kwargs: dict[str, Any] = {"dest": f"raychaos_{option.dest}", "help": option.help}
        if option.is_flag:
            group.addoption(option.flag, action="store_true", default=False, **kwargs)
        elif option.repeatable:
            group.addoption(option.flag, action="append", default=[], **kwargs)
        else:
            group.addoption(option.flag, default=None, **kwargs)
        parser.addini(
            option.ini, f"{option.help} (default {option.default}; env {option.env})", default=""
        )
    parser.addini(
        WORKLOADS_INI,
        "directories of workload packages shipped into every node (default: experiments/workloads)",
        type="paths",
        default=[],
    )


@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster(topology=None, **spec): configure the ray_cluster fixture: a named topology "
        "from fixtures/clusters and/or ClusterSpec fields (workers=2, gcs_ft='redis', env={...})",
    )
    config.addinivalue_line("markers", "claim(*ids): claim ids this experiment verifies")
    config.addinivalue_line(
        "markers",
        "needs_tools(*tools): fault tools this experiment execs in its nodes (ps, kill, "
        "iptables, ss, tc, fallocate); it skips on an image that lacks one",
    )
    config.addinivalue_line(
        "markers",
        "no_boot_ahead: boot this test's cluster at its own set-up, not while the previous "
        "test runs (for a test whose cluster_spec fixture is not its cluster marker)",
    )
    try:
        settings = resolve(
            {o.dest: config.getoption(f"raychaos_{o.dest}") for o in OPTIONS},
            {o.ini: str(config.getini(o.ini)) for o in OPTIONS},
        )
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    paths = [Path(p) for p in config.getini(WORKLOADS_INI)]
    config.stash[SETTINGS_KEY] = Settings(**{**settings.__dict__, "workload_paths": tuple(paths)})
    workerinput = getattr(config, "workerinput", None)
    config.stash[RUN_ID_KEY] = (
        workerinput[RUN_ID_INPUT] if workerinput else labels.RunIdentity().run_id
    )
    config.stash[USED_KEY] = False
    selection.register(config)
    attach_config(config)
    from chaos.report import allure as reporting

    config.pluginmanager.register(reporting, "raychaos-reporting")
    config.pluginmanager.register(engine_hooks, "raychaos-engines")
    config.pluginmanager.register(trials, "raychaos-trials")
    config.pluginmanager.register(boot_ahead_hooks, "raychaos-boot-ahead")
    config.pluginmanager.register(image_hooks, "raychaos-image")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → workers: one run id for the whole session."""
    node.workerinput[RUN_ID_INPUT] = node.config.stash[RUN_ID_KEY]


@pytest.hookimpl
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that boots a cluster runs once per Ray release of the run, the release in
    its id (``test_x[2.60.0]``) and as a parameter, so each release has its own history;
    with ``--raychaos-trials N``, N times per release (``test_x[2.60.0-trial2]``, one
    history: :mod:`chaos.trials`)."""
    if VERSION_FIXTURE in metafunc.fixturenames:
        settings = metafunc.config.stash[SETTINGS_KEY]
        versions = image_hooks.run_versions(metafunc.config)
        metafunc.parametrize(VERSION_FIXTURE, versions, ids=list(versions))
        trials.parametrize(metafunc, settings.trials)


@pytest.hookimpl
def pytest_collection_finish(session: pytest.Session) -> None:
    """Note whether any collected test uses raychaos; say what it will run against."""
    config = session.config
    config.stash[USED_KEY] = any(uses_raychaos(item) for item in session.items)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if config.stash[USED_KEY] and reporter is not None and not hasattr(config, "workerinput"):
        from chaos.backends.docker.images import node_image_tag

        settings = config.stash[SETTINGS_KEY]
        built = ", ".join(node_image_tag(v, "3.11") for v in settings.ray_versions)
        image = settings.image or built
        versions = image_hooks.run_versions(config)
        source = "the image's" if settings.image else settings.sources.get("ray_versions")
        reporter.write_line(
            f"raychaos: run {config.stash[RUN_ID_KEY]}, Ray {', '.join(versions)} "
            f"({source}), image {image}, "
            f"boot timeout {settings.boot_timeout:.0f} s, keep={settings.keep}"
        )
        for line in engine_lines(config, settings):
            reporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember each phase's report so fixture teardown knows whether the test failed.

    A harness error (``ChaosError``) stays an error — Allure files it as *broken* — but is shown
    as one line that says what to do, not a traceback from deep inside docker-py. A
    ``CheckFailed`` keeps its traceback: it is a verdict, and the line that judged matters.

    pytest applies an xfail's ``raises=`` to every phase, so a postcondition failing at
    teardown (an ``AssertionError``) after a finding's body would read as that finding again:
    a raychaos test's teardown failure stays an error.
    """
    report = yield
    error = call.excinfo.value if call.excinfo is not None else None
    if (
        report.when == "teardown"
        and hasattr(report, "wasxfail")
        and error is not None
        and not isinstance(error, pytest.xfail.Exception)
        and ran_raychaos(item)
    ):
        del report.wasxfail
        report.outcome = "failed"
    if isinstance(error, ChaosError) and not isinstance(error, CheckFailed):
        report.longrepr = f"{type(error).__name__}: {error}"
    item.stash.setdefault(PHASE_REPORTS, {})[report.when] = report
    return report


def _failed(node: pytest.Item) -> bool:
    reports = node.stash.get(PHASE_REPORTS, {})
    return any(r.failed for r in reports.values()) or node.stash.get(TEARDOWN_FAILED, False)


def _expected(item: pytest.Item, error: BaseException) -> bool:
    """Whether ``error`` is what the test's xfail marker expects (a recorded finding)."""
    mark = item.get_closest_marker("xfail")
    if mark is None or not all(bool(c) for c in mark.args):
        return False
    raises = mark.kwargs.get("raises")
    return raises is None or isinstance(error, raises)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The experiment's evidence on the test itself, not under its teardown.

    After the test body (passed or not): the history so far, its timeline picture and the
    measurements, in a last step of the body; when the body failed (not as its xfail marker
    expects), every node's log too. The fixture's teardown still writes the final history
    (heals and postconditions included) to ``reports/timelines/``.
    """
    try:
        return (yield)
    except BaseException as exc:
        if not INTERRUPTED.is_set() and not _expected(item, exc):
            factory = item.stash.get(FACTORY_KEY, None)
            if factory is not None:
                factory.attach_logs("the test failed")
        raise
    finally:
        kit = item.stash.get(EXPERIMENT_KEY, None)
        if kit is not None and not INTERRUPTED.is_set():
            _attach_evidence(kit, item, item.config.rootpath / "reports" / "timelines")


# -- fixtures -------------------------------------------------------------------------------
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
    from chaos.backends.docker import reaper
    from chaos.backends.docker.engines import EnginePool, engine_urls
    from chaos.backends.docker.images import BuildSettings
    from chaos.backends.docker.sweep import sweep

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
    from chaos.backends.docker.images import BuildSettings, ImageBuilder

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
    return image_hooks.run_versions(pytestconfig)[-1]


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
    factory.teardown(_failed(request.node))


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
    request: pytest.FixtureRequest,
    ray_cluster: Cluster,
    nemesis: Nemesis,
    pytestconfig: pytest.Config,
) -> Iterator[Experiment]:
    """Cluster + nemesis + observer; afterwards heal, check INV-01/INV-02, write evidence."""
    from chaos.experiment import Experiment
    from chaos.observer.observer import Observer

    observer = Observer(ray_cluster).start()
    kit = Experiment(ray_cluster, nemesis, observer)
    # Readiness does not wait for the dashboard; the observer (State API) needs it.
    bound = ray_cluster.spec.boot_timeout_s
    with step(f"wait: the observer's first State API sample (dashboard up) ≤ {seconds(bound)}"):
        if not observer.wait_first_sample(bound):
            observer.stop()
            why = f": it gave up: {observer.failure}" if observer.failure else ""
            message = f"the State API (dashboard) never answered the observer{why}"
            pytest.fail(message, pytrace=False)
    request.node.stash[EXPERIMENT_KEY] = kit

    try:
        yield kit
        if INTERRUPTED.is_set() or engine_lost_already(request.node):
            # Interrupted: no heal, postconditions or evidence; the clusters go now. Engine
            # lost: nothing to heal or check there; the test already ended broken.
            return
        try:
            kit.nemesis.heal_all()
            if not _failed(request.node):
                # Labelled before the checks: a violated postcondition shows under its claim.
                _label_postconditions([c for c in ("INV-01", "INV-02") if c not in kit.waived])
                kit.check_no_unexpected_death()
                kit.check_resources_settle()
        except BaseException:
            request.node.stash[TEARDOWN_FAILED] = True
            factory = request.node.stash.get(FACTORY_KEY, None)
            if factory is not None and not INTERRUPTED.is_set():
                factory.attach_logs("a postcondition or heal failed")
            raise
    finally:
        if INTERRUPTED.is_set() or engine_lost_already(request.node):
            # Stopping the observer's stream takes seconds; removing the cluster ends it too.
            threading.Thread(target=observer.stop, name="observer-stop", daemon=True).start()
        else:
            observer.stop()
            # The final history (heals, postconditions) on disk; the report has the body's.
            _write_evidence(kit, request.node, pytestconfig.rootpath / "reports" / "timelines")


def _label_postconditions(claims: list[str]) -> None:
    """Claim labels of the postconditions checked at teardown (the test's own claims are
    added by :mod:`chaos.report.allure` at the end of set-up)."""
    from chaos.report.labels import label_claims

    try:
        label_claims(claims)
    except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
        _say(f"raychaos: could not label postconditions: {exc!r}")


def _write_evidence(kit: Experiment, item: pytest.Item, directory: Path) -> None:
    """History JSON and timeline into reports/; never breaks the run."""
    try:
        from chaos.report.timeline import write_evidence

        write_evidence(kit, directory, item.nodeid)
    except Exception as exc:  # noqa: BLE001 - evidence is best effort, the verdict is not
        _say(f"raychaos: could not write evidence for {item.nodeid}: {exc!r}")


def _attach_evidence(kit: Experiment, item: pytest.Item, directory: Path) -> None:
    """History JSON, timeline and measurements into reports/ and, as the last step of the
    test body, into Allure; never breaks the run."""
    try:
        import allure

        from chaos.report.timeline import write_evidence

        with step("evidence: history, timeline and measurements"):
            history, picture = write_evidence(kit, directory, item.nodeid)
            allure.attach.file(
                str(history), name="history", attachment_type=allure.attachment_type.JSON
            )
            if picture is not None:
                allure.attach.file(
                    str(picture), name="timeline", attachment_type=allure.attachment_type.PNG
                )
            if kit.measurements:
                import json

                allure.attach(
                    json.dumps(kit.measurements, indent=1, default=repr),
                    name="measurements",
                    attachment_type=allure.attachment_type.JSON,
                )
    except Exception as exc:  # noqa: BLE001 - evidence is best effort, the verdict is not
        _say(f"raychaos: could not write evidence for {item.nodeid}: {exc!r}")


_say = say
