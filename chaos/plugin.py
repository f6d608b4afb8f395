"""The raychaos pytest plugin (entry point ``pytest11``): options, markers, cluster fixtures.

Thin by design (pytest-xdist's shape): the work lives in :mod:`chaos.cluster` and friends, and
heavy imports (docker) happen inside hooks and fixtures, so ``pytest --help`` works without a
daemon. Fixtures are small and overridable: override ``cluster_spec`` to change what
``ray_cluster`` boots, or call ``ray_cluster_factory`` for several clusters.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from chaos import labels
from chaos.cluster.spec import ClusterSpec, load_topology
from chaos.errors import ChaosError, SpecError
from chaos.settings import OPTIONS, SettingError, Settings, resolve

if TYPE_CHECKING:
    import docker

    from chaos.backends.docker.images import ImageBuilder
    from chaos.cluster.cluster import Cluster
    from chaos.experiment import Experiment
    from chaos.nemesis.nemesis import Nemesis

SETTINGS_KEY = pytest.StashKey[Settings]()
RUN_ID_KEY = pytest.StashKey[str]()
PHASE_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
RUN_ID_INPUT = "raychaos_run_id"
WORKLOADS_INI = "raychaos_workloads"


# -- options and configuration ------------------------------------------------------------
@pytest.hookimpl
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("raychaos", "raychaos: Ray chaos experiments in Docker")
    for option in OPTIONS:
        kwargs: dict[str, Any] = {"dest": f"raychaos_{option.dest}", "help": option.help}
        if option.is_flag:
            group.addoption(option.flag, action="store_true", default=False, **kwargs)
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
    config.addinivalue_line("markers", "claim(*ids): CLAIMS.md ids this experiment verifies")
    try:
        settings = resolve(
            {o.dest: config.getoption(f"raychaos_{o.dest}") for o in OPTIONS},
            {o.ini: str(config.getini(o.ini)) for o in OPTIONS},
        )
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    paths = [Path(p) for p in config.getini(WORKLOADS_INI)]
    if not paths:
        default = config.rootpath / "experiments" / "workloads"
        paths = [default] if default.is_dir() else []
    config.stash[SETTINGS_KEY] = Settings(**{**settings.__dict__, "workload_paths": tuple(paths)})
    workerinput = getattr(config, "workerinput", None)
    config.stash[RUN_ID_KEY] = (
        workerinput[RUN_ID_INPUT] if workerinput else labels.RunIdentity().run_id
    )
    _install_sigterm_handler()
    config.pluginmanager.register(
        importlib.import_module("chaos.report.allure"), "raychaos-reporting"
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → workers: one run id for the whole session."""
    node.workerinput[RUN_ID_INPUT] = node.config.stash[RUN_ID_KEY]


def _install_sigterm_handler() -> None:
    """SIGTERM unwinds like Ctrl-C, so fixture teardown removes the clusters."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with contextlib.suppress(ValueError):  # not the main thread: nothing to install
        signal.signal(signal.SIGTERM, interrupt)


@pytest.hookimpl
def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller (or a plain run) sweeps objects left by dead runs."""
    if hasattr(session.config, "workerinput"):
        return
    try:
        from chaos.backends.docker.client import connect
        from chaos.backends.docker.sweep import sweep

        client = connect(timeout=20)
    except ChaosError:
        return  # no daemon: tests that need one say so themselves
    try:
        report = sweep(client)
        if report.removed or report.failed:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"raychaos: sweep {report}")
    finally:
        client.close()


@pytest.hookimpl
def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash[SETTINGS_KEY]
    from chaos.backends.docker.images import ray_image_tag

    image = settings.image or ray_image_tag(settings.ray_version, "3.11")
    lines = [
        f"raychaos: run {config.stash[RUN_ID_KEY]}, Ray {settings.ray_version} "
        f"({settings.sources.get('ray_version')}), image {image}, "
        f"boot timeout {settings.boot_timeout:.0f} s, keep={settings.keep}"
    ]
    try:
        from chaos.backends.docker.client import connect

        client = connect(timeout=10)
        try:
            version = client.version()
            lines.append(
                f"raychaos: Docker server {version.get('Version')} "
                f"(API {version.get('ApiVersion')}) at {client.api.base_url}"
            )
        finally:
            client.close()
    except ChaosError as exc:
        lines.append(f"raychaos: Docker unavailable: {exc.message}")
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember each phase's report so fixture teardown knows whether the test failed.

    A harness error (``ChaosError``) stays an error — Allure files it as *broken* — but is shown
    as one line that says what to do, not a traceback from deep inside docker-py.
    """
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, ChaosError):
        error = call.excinfo.value
        report.longrepr = f"{type(error).__name__}: {error}"
    item.stash.setdefault(PHASE_REPORTS, {})[report.when] = report
    return report


def _failed(node: pytest.Item) -> bool:
    reports = node.stash.get(PHASE_REPORTS, {})
    return any(r.failed for r in reports.values())


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
def docker_client() -> Iterator[docker.DockerClient]:
    """A Docker client for the engine named by DOCKER_HOST (or the local socket)."""
    from chaos.backends.docker.client import connect

    client = connect()
    yield client
    client.close()


@pytest.fixture(scope="session")
def image_builder(docker_client: docker.DockerClient, raychaos_settings: Settings) -> ImageBuilder:
    """Builds Ray images on first use, once per session across xdist workers."""
    from chaos.backends.docker.images import BuildSettings, ImageBuilder

    return ImageBuilder(
        docker_client, BuildSettings(base_image=raychaos_settings.base_image or None)
    )


@pytest.fixture
def cluster_spec(request: pytest.FixtureRequest, raychaos_settings: Settings) -> ClusterSpec:
    """What ``ray_cluster`` boots: the ``cluster`` marker over the session settings."""
    return spec_from_marker(request.node.get_closest_marker("cluster"), raychaos_settings)


def spec_from_marker(marker: pytest.Mark | None, settings: Settings) -> ClusterSpec:
    """``@pytest.mark.cluster(topology, **fields)`` → a validated :class:`ClusterSpec`."""
    base = ClusterSpec(ray_version=settings.ray_version, boot_timeout_s=settings.boot_timeout)
    args: tuple[Any, ...] = marker.args if marker else ()
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    topology = kwargs.pop("topology", None) or (args[0] if args else None)
    if len(args) > 1:
        raise TypeError(f"cluster marker takes at most one positional argument, got {args!r}")
    try:
        if topology:
            base = load_topology(str(topology)).replace(
                ray_version=settings.ray_version, boot_timeout_s=settings.boot_timeout
            )
        fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
        fields.update(kwargs)
        spec = ClusterSpec.from_dict(fields)
        if settings.image and spec.image is None:
            spec = spec.replace(image=settings.image)
        return spec.validate()
    except SpecError as exc:
        raise pytest.UsageError(f"@pytest.mark.cluster: {exc}") from None


class ClusterFactory:
    """Boots clusters for one test and removes them afterwards (unless kept for a failure)."""

    def __init__(
        self,
        request: pytest.FixtureRequest,
        client: docker.DockerClient,
        identity: labels.RunIdentity,
        builder: ImageBuilder,
        settings: Settings,
    ) -> None:
        self.request = request
        self.client = client
        self.identity = identity
        self.builder = builder
        self.settings = settings
        self.clusters: list[Cluster] = []

    def __call__(self, spec: ClusterSpec | None = None, **fields: Any) -> Cluster:
        """Boot ``spec`` (default: the test's ``cluster`` marker) with ``fields`` replaced."""
        from chaos.cluster.cluster import Cluster

        if spec is None:
            spec = spec_from_marker(self.request.node.get_closest_marker("cluster"), self.settings)
        if fields:
            spec = spec.replace(**fields)
        cluster = Cluster(
            spec,
            client=self.client,
            identity=self.identity,
            test_id=self.request.node.nodeid,
            builder=self.builder,
            workload_paths=self.settings.workload_paths,
            tag=f"t{_counter()}",
            boot_slots=self.settings.boot_slots or None,
        )
        self.clusters.append(cluster)
        cluster.start()
        return cluster

    def teardown(self, failed: bool) -> None:
        from chaos.backends.docker.sweep import keep

        errors: list[ChaosError] = []
        for cluster in reversed(self.clusters):
            if failed and self.settings.keep:
                keep(cluster.key)
                _say(
                    f"raychaos: kept cluster {cluster.key} of failed {self.request.node.nodeid}:\n"
                    f"  docker ps --filter label=raychaos.cluster={cluster.key}\n"
                    f"  docker exec -it {cluster.head.container.name} ray status\n"
                    f"  docker logs {cluster.head.container.name}\n"
                    f"  remove with: raychaos sweep --all"
                )
                continue
            try:
                cluster.stop()
            except ChaosError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]


_COUNT = [0]


def _counter() -> int:
    _COUNT[0] += 1
    return _COUNT[0]


@pytest.fixture
def ray_cluster_factory(
    request: pytest.FixtureRequest,
    docker_client: docker.DockerClient,
    raychaos_identity: labels.RunIdentity,
    image_builder: ImageBuilder,
    raychaos_settings: Settings,
) -> Iterator[ClusterFactory]:
    """Call it to boot clusters (custom specs, several per test); all are removed afterwards."""
    factory = ClusterFactory(
        request, docker_client, raychaos_identity, image_builder, raychaos_settings
    )
    yield factory
    factory.teardown(_failed(request.node))


@pytest.fixture
def ray_cluster(ray_cluster_factory: ClusterFactory, cluster_spec: ClusterSpec) -> Cluster:
    """A ready Ray cluster as the test's ``cluster`` marker (or ``cluster_spec``) describes."""
    return ray_cluster_factory(cluster_spec)


@pytest.fixture
def nemesis(ray_cluster: Cluster) -> Iterator[Nemesis]:
    """Faults on ``ray_cluster``; every fault still active is healed at teardown."""
    from chaos.nemesis.nemesis import Nemesis

    faults = Nemesis(ray_cluster)
    yield faults
    faults.heal_all()


@pytest.fixture
def experiment(
    request: pytest.FixtureRequest, ray_cluster: Cluster, pytestconfig: pytest.Config
) -> Iterator[Experiment]:
    """Cluster + nemesis + observer; afterwards heal, check INV-01/INV-02, write evidence."""
    from chaos.experiment import Experiment
    from chaos.nemesis.nemesis import Nemesis
    from chaos.observer.observer import Observer

    observer = Observer(ray_cluster).start()
    kit = Experiment(ray_cluster, Nemesis(ray_cluster), observer)
    # Readiness does not wait for the dashboard; the observer (State API) needs it.
    if (
        ray_cluster.history.await_event(
            lambda e: e.source == "observer" and e.kind == "node_state",
            timeout=ray_cluster.spec.boot_timeout_s,
        )
        is None
    ):
        observer.stop()
        pytest.fail("the State API (dashboard) never answered the observer", pytrace=False)

    try:
        yield kit
        kit.nemesis.heal_all()
        if not _failed(request.node):
            # Labelled before the checks: a violated postcondition shows under its claim.
            _label_postconditions([c for c in ("INV-01", "INV-02") if c not in kit.waived])
            kit.check_no_unexpected_death()
            kit.check_resources_settle()
    finally:
        observer.stop()
        _attach_evidence(kit, request.node, pytestconfig.rootpath / "reports" / "timelines")


def _label_postconditions(claims: list[str]) -> None:
    try:
        import allure

        for claim in claims:
            allure.dynamic.label("claim", claim)
    except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
        _say(f"raychaos: could not label postconditions: {exc!r}")


def _attach_evidence(kit: Experiment, item: pytest.Item, directory: Path) -> None:
    """History JSON and timeline into reports/ and Allure; never breaks the run."""
    try:
        history, picture = kit.write_evidence(directory, item.nodeid)
        import allure

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Allure labels from the ``claim`` marker: epic, feature, story, claim ids, docs link."""
    claims = [str(c) for m in item.iter_markers("claim") for c in m.args]
    if claims:
        try:
            _label(item, sorted(set(claims)))
        except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
            _say(f"raychaos: could not label {item.nodeid}: {exc!r}")
    return (yield)


def _label(item: pytest.Item, claims: list[str]) -> None:
    import allure

    from chaos.report.claims import family

    settings = item.config.stash[SETTINGS_KEY]
    allure.dynamic.epic("Ray fault tolerance")
    families = [family(c) for c in claims]
    for fam in {f.feature: f for f in families}.values():
        allure.dynamic.feature(fam.feature)
        allure.dynamic.link(fam.doc, name=f"Ray docs: {fam.feature}")
    worst = min(
        (f.severity for f in families), key=["blocker", "critical", "normal", "minor"].index
    )
    allure.dynamic.severity(getattr(allure.severity_level, worst.upper()))
    story = (
        (item.obj.__doc__ or item.name).strip().splitlines()[0]
        if hasattr(item, "obj")
        else item.name
    )
    allure.dynamic.story(story)
    for claim in claims:
        allure.dynamic.label("claim", claim)
    allure.dynamic.parameter("ray_version", settings.ray_version, excluded=True)


def _say(text: str) -> None:
    stream = sys.__stderr__ or sys.stderr
    stream.write(text + "\n")
    stream.flush()
