"""Hooks for a team's own image (``--raychaos-image``): probe it before any cluster, run the
experiments on the Ray it holds, and skip the ones whose fault tools it lacks.

Registered by :mod:`chaos.plugin`; inert unless ``--raychaos-image`` (or its ini/env mirror)
names an image — naming one asks raychaos to inspect it, so the probe runs at collection.
"""

from __future__ import annotations

import sys

import pytest

from chaos import labels
from chaos.errors import ChaosError
from chaos.plugin.items import uses_raychaos
from chaos.plugin.keys import RUN_ID_KEY, SETTINGS_KEY
from chaos.plugin.settings import Settings
from chaos.spec.image_contract import (
    FAULT_TOOLS,
    MARKER,
    MODULES,
    MODULES_MARKER,
    ImageProbe,
    module_skip_reason,
    needed_modules,
    needed_tools,
    skip_reason,
)

PROBE_KEY = pytest.StashKey[ImageProbe]()


def probe_of(config: pytest.Config) -> ImageProbe | None:
    """The probe of the run's ``--raychaos-image`` (derived and probed once per process, the
    derived image shared through the engine); None without one or for an image of ours."""
    settings: Settings = config.stash[SETTINGS_KEY]
    if not settings.image:
        return None
    if PROBE_KEY in config.stash:
        return config.stash[PROBE_KEY]
    from chaos.plugin.backend import (
        BuildSettings,
        ImageBuilder,
        connect,
        derive,
        engine_urls,
        stderr_progress,
    )

    try:
        client = connect(url=engine_urls(settings.docker_hosts)[0])
        builder = ImageBuilder(
            client, BuildSettings(base_image=settings.base_image or None), stderr_progress
        )
        identity = labels.RunIdentity(run_id=config.stash[RUN_ID_KEY])
        probe = derive(builder, settings.image, identity.labels(purpose="probe"))
    except ChaosError as exc:
        raise pytest.UsageError(f"--raychaos-image {settings.image}: {exc}") from None
    if probe is None:
        return None
    if settings.sources.get("ray_versions") != "default" and settings.ray_versions != (
        probe.ray_version,
    ):
        raise pytest.UsageError(
            f"--raychaos-image {settings.image} holds Ray {probe.ray_version}, but the run asks "
            f"for {', '.join(settings.ray_versions)} "
            f"({settings.sources.get('ray_versions')}): one image runs one release — drop "
            "--raychaos-ray-version, or pass an image per release (raychaos upgrade-check "
            "--from-image A --to-image B)"
        )
    from chaos.spec.releases import held_by_image

    held_by_image(probe.ray_version)  # a team's build (2.60.0+mycorp.1) is on no index
    config.stash[PROBE_KEY] = probe
    return probe


def run_versions(config: pytest.Config) -> tuple[str, ...]:
    """The releases tests are parametrised with: the image's own Ray when one is given."""
    probe = probe_of(config)
    settings: Settings = config.stash[SETTINGS_KEY]
    return (probe.ray_version,) if probe is not None else settings.ray_versions


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """Probe before collecting (on the xdist controller too), so a bad image or a release
    that contradicts it is one usage line, not a collection error per test module."""
    probe_of(session.config)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip experiments that exec a fault tool the image lacks (before any cluster boots),
    and say once which tools are missing and what they disable."""
    ours = [item for item in items if uses_raychaos(item)]
    probe = probe_of(config) if ours else None
    if probe is None:
        return
    disabled: dict[str, list[str]] = {}
    for item in ours:
        modules = item.get_closest_marker(MODULES_MARKER)
        mark = item.get_closest_marker(MARKER)
        try:
            needed = needed_tools(mark.args) if mark else ()
            imports = needed_modules(modules.args) if modules else ()
        except ValueError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        reason = module_skip_reason(probe, imports) or skip_reason(probe, needed)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
            lacking = [m for m in imports if probe.import_error(m)]
            lacking += [tool for tool in needed if not probe.has(tool)]
            for name in lacking:
                disabled.setdefault(name, []).append(item.name)
    _say(config, probe, disabled)


def _say(config: pytest.Config, probe: ImageProbe, disabled: dict[str, list[str]]) -> None:
    """One line for the image and one per missing tool; under xdist only from gw0."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker not in (None, "gw0"):
        return
    lines = [f"raychaos: image {probe.describe()}"]
    for tool in probe.missing_fault_tools:
        tests = disabled.get(tool, [])
        what = f"skips {len(tests)}: {', '.join(tests)}" if tests else "no collected test needs it"
        lines.append(f"raychaos: image lacks {tool} ({FAULT_TOOLS[tool]}): {what}")
    for module in probe.missing_modules:
        tests = disabled.get(module, [])
        what = f"skips {len(tests)}: {', '.join(tests)}" if tests else "no collected test needs it"
        lines.append(
            f"raychaos: image cannot import {module} ({probe.import_error(module)}; "
            f"{MODULES[module]}): {what}"
        )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None and worker is None:
            reporter.write_line(line)
        else:
            stream = sys.__stderr__ or sys.stderr
            stream.write(line + "\n")
            stream.flush()
