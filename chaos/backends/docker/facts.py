"""What a run's Docker engines say of themselves, for Allure's ``environment.properties``.

The plugin asks at session finish and hands the answer to
:mod:`chaos.plugin.results.runfiles`, which writes it: the report layer never talks to an
engine. An engine that cannot be asked is written as ``unavailable: …``, never an error: the
run's results matter more than its header.
"""

from __future__ import annotations

import contextlib

from chaos import labels
from chaos.backends.docker.client import connect
from chaos.backends.docker.engines import assignment, default_url, describe_server, display
from chaos.errors import ChaosError


def engine_properties(image: str, urls: tuple[str, ...], workers: int) -> dict[str, str]:
    """``docker.*`` and ``image.*`` of the run's first engine (None: DOCKER_HOST's); with
    several engines, also ``engine.<i>`` of each."""
    props: dict[str, str] = {}
    try:
        props.update(_docker_properties(image, urls[0] if urls else None))
    except Exception as exc:  # noqa: BLE001 - docker-py and requests raise many types
        props["docker.server"] = f"unavailable: {exc!r}"
    if len(urls) > 1:
        props.update(_engine_properties(urls, workers))
    return props


def _gib(value: object) -> str:
    try:
        return f"{int(str(value)) / 2**30:.1f} GiB"
    except ValueError:
        return "unknown"


def _docker_properties(image: str, url: str | None = None) -> dict[str, str]:
    """Docker server (of engine ``url``; None: DOCKER_HOST's) and the Ray images present
    (tag → id, digests when pulled)."""
    try:
        client = connect(timeout=10, url=url)
    except ChaosError as exc:
        return {"docker.server": f"unavailable: {exc.message}"}
    props: dict[str, str] = {}
    try:
        version = client.version()
        info = client.info()
        props["docker.server"] = (
            f"{version.get('Version')} (API {version.get('ApiVersion')}, "
            f"{info.get('OperatingSystem')}, {version.get('Arch')})"
        )
        props["docker.host"] = display(url or default_url())
        props["docker.host.cpus"] = str(info.get("NCPU"))
        props["docker.host.memory"] = _gib(info.get("MemTotal"))
        images = list(client.images.list(filters={"label": f"{labels.IMAGE_KIND}=ray"}))
        with contextlib.suppress(Exception):  # a ready-made image may be absent or unlabelled
            images.append(client.images.get(image))
        for found in images:
            digests = found.attrs.get("RepoDigests") or []
            shown = str(found.id) + (
                f" (digest {', '.join(digests)})" if digests else " (built here)"
            )
            for tag in found.tags or [found.short_id]:
                props[f"image.{tag}"] = shown
    finally:
        client.close()
    return props


def _engine_properties(urls: tuple[str, ...], workers: int) -> dict[str, str]:
    """With several engines: ``engine.<i>`` = URL, server, CPUs, ID and the workers on it."""
    props: dict[str, str] = {"engines": ", ".join(display(u) for u in urls)}
    placed = assignment(urls, workers)
    for index, url in enumerate(urls):
        who = ", ".join(placed[url]) or "no worker"
        try:
            client = connect(timeout=10, url=url)
        except ChaosError as exc:
            props[f"engine.{index}"] = f"{display(url)} (unavailable: {exc.message}; {who})"
            continue
        try:
            info = client.info()
            server = describe_server(info, str(client.version().get("Version") or ""))
            props[f"engine.{index}"] = (
                f"{display(url)} ({server}, ID {info.get('ID')}, workers {who})"
            )
        except Exception as exc:  # noqa: BLE001 - docker-py and requests raise many types
            props[f"engine.{index}"] = f"{display(url)} (unavailable: {exc!r:.200}; {who})"
        finally:
            client.close()
    return props
