"""Options, markers and the session's settings; each test once per Ray release (and trial).

Settings resolve once per process at configure time (:mod:`chaos.plugin.settings`: marker >
CLI > env > ini) and live in ``config.stash``; the run id is the controller's, handed to every
xdist worker, so all labels of one run agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos import labels
from chaos.plugin import images, trials
from chaos.plugin.engines import engine_lines
from chaos.plugin.items import uses_raychaos
from chaos.plugin.keys import RUN_ID_KEY, SETTINGS_KEY, USED_KEY
from chaos.plugin.settings import OPTIONS, SettingError, Settings, resolve
from chaos.plugin.terminal import attach_config

RUN_ID_INPUT = "raychaos_run_id"
VERSION_FIXTURE = "raychaos_ray_version"
WORKLOADS_INI = "raychaos_workloads"


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
        "needs_modules(*modules): Python modules this experiment imports in its nodes "
        "(ray.serve); it skips on an image where one does not import",
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
    attach_config(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → workers: one run id for the whole session."""
    node.workerinput[RUN_ID_INPUT] = node.config.stash[RUN_ID_KEY]


@pytest.hookimpl
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that boots a cluster runs once per Ray release of the run, the release in
    its id (``test_x[2.60.0]``) and as a parameter, so each release has its own history;
    with ``--raychaos-trials N``, N times per release (``test_x[2.60.0-trial2]``, one
    history: :mod:`chaos.plugin.trials`)."""
    if VERSION_FIXTURE in metafunc.fixturenames:
        settings = metafunc.config.stash[SETTINGS_KEY]
        versions = images.run_versions(metafunc.config)
        metafunc.parametrize(VERSION_FIXTURE, versions, ids=list(versions))
        trials.parametrize(metafunc, settings.trials)


@pytest.hookimpl
def pytest_collection_finish(session: pytest.Session) -> None:
    """Note whether any collected test uses raychaos; say what it will run against."""
    config = session.config
    config.stash[USED_KEY] = any(uses_raychaos(item) for item in session.items)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if config.stash[USED_KEY] and reporter is not None and not hasattr(config, "workerinput"):
        from chaos.plugin.backend import node_image_tag

        settings = config.stash[SETTINGS_KEY]
        built = ", ".join(node_image_tag(v, "3.11") for v in settings.ray_versions)
        image = settings.image or built
        versions = images.run_versions(config)
        source = "the image's" if settings.image else settings.sources.get("ray_versions")
        reporter.write_line(
            f"raychaos: run {config.stash[RUN_ID_KEY]}, Ray {', '.join(versions)} "
            f"({source}), image {image}, "
            f"boot timeout {settings.boot_timeout:.0f} s, keep={settings.keep}"
        )
        for line in engine_lines(config, settings):
            reporter.write_line(line)
