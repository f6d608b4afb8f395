"""Which collected tests are raychaos tests, and what their markers and parameters ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos.errors import SpecError
from chaos.plugin.keys import ENGINE_KEY, PHASE_REPORTS, SETTINGS_KEY, TEARDOWN_FAILED
from chaos.plugin.settings import Settings
from chaos.spec.topology import ClusterSpec, load_topology, releases_available

#: Fixtures and markers whose use makes a test a raychaos test (and wakes the plugin up).
FIXTURES = frozenset(
    {
        "ray_cluster",
        "ray_cluster_factory",
        "nemesis",
        "experiment",
        "docker_client",
        "image_builder",
        "raychaos_settings",
        "raychaos_identity",
        "raychaos_session",
        "raychaos_engines",
    }
)
MARKERS = ("cluster", "claim", "needs_tools", "needs_modules")


def uses_raychaos(item: pytest.Item) -> bool:
    """At collection: ``item`` carries a raychaos marker or asks for a fixture of that name.

    A name can belong to another plugin's fixture too (``experiment`` is common), so what
    must be exact once the test runs uses :func:`ran_raychaos` instead.
    """
    if any(item.get_closest_marker(m) is not None for m in MARKERS):
        return True
    return bool(set(getattr(item, "fixturenames", ())) & FIXTURES)


def ran_raychaos(item: pytest.Item) -> bool:
    """After set-up: ``item`` carries a raychaos marker or got a value from raychaos's
    fixtures (its ``funcargs`` hold an object of this package: a Cluster, a Nemesis…)."""
    if any(item.get_closest_marker(m) is not None for m in MARKERS):
        return True
    values = getattr(item, "funcargs", {}).values()
    return any(type(v).__module__.split(".", 1)[0] == __name__.split(".", 1)[0] for v in values)


def version_of(item: pytest.Item) -> str | None:
    """The Ray release a test is parametrised with (None: the run's main release)."""
    callspec = getattr(item, "callspec", None)
    version = getattr(callspec, "params", {}).get("raychaos_ray_version")
    return str(version) if version else None


def engine_of(item: pytest.Item) -> str:
    """The name of the engine ``item``'s clusters run on: the one it was given, else the one
    its process is planned to use (the run's engines, its xdist worker)."""
    engine = item.stash.get(ENGINE_KEY, None)
    if engine is not None:
        return engine.name
    from chaos.plugin.backend import current_worker, display, engine_urls, planned_url

    settings = item.config.stash.get(SETTINGS_KEY, None)
    urls = engine_urls(settings.docker_hosts if settings is not None else ())
    return display(planned_url(urls, current_worker()))


def spec_from_marker(
    marker: pytest.Mark | None, settings: Settings, ray_version: str | None = None
) -> ClusterSpec:
    """``@pytest.mark.cluster(topology, **fields)`` → a validated :class:`ClusterSpec`."""
    ray_version = ray_version or settings.ray_version
    base = ClusterSpec(ray_version=ray_version, boot_timeout_s=settings.boot_timeout)
    args: tuple[Any, ...] = marker.args if marker else ()
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    topology = kwargs.pop("topology", None) or (args[0] if args else None)
    if len(args) > 1:
        raise TypeError(f"cluster marker takes at most one positional argument, got {args!r}")
    try:
        if topology:
            base = load_topology(str(topology)).replace(
                ray_version=ray_version, boot_timeout_s=settings.boot_timeout
            )
        fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
        fields.update(kwargs)
        spec = ClusterSpec.from_dict(fields)
        if settings.image and spec.image is None:
            spec = spec.replace(image=settings.image)
        return releases_available(spec.validate())
    except SpecError as exc:
        raise pytest.UsageError(f"@pytest.mark.cluster: {exc}") from None


def failed(item: pytest.Item) -> bool:
    """A phase of ``item`` failed so far, or a fixture's teardown did (no report says so yet)."""
    reports = item.stash.get(PHASE_REPORTS, {})
    return any(r.failed for r in reports.values()) or item.stash.get(TEARDOWN_FAILED, False)


def evidence_dir(config: pytest.Config) -> Path:
    """Where every test's history JSON and timeline go: ``reports/timelines`` under the rootdir."""
    return config.rootpath / "reports" / "timelines"
