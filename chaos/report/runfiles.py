"""Allure's run-level files: ``categories.json``, ``executor.json``, ``environment.properties``.

Written once per run, by the xdist controller (or the single process), at session finish and
only when raychaos tests of this run left results in the directory. They are merged into
what a repository already keeps there, never replaced wholesale (see :func:`write_run_files`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chaos.report.categories import CATEGORIES, merge_categories
from chaos.report.model import ray_version_of
from chaos.report.properties import merge_properties

EXECUTOR = "raychaos"


def write_atomic(path: Path, text: str) -> None:
    # Allure's own writer does the same, so a reader never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def raychaos_versions(alluredir: Path, since_ms: int) -> set[str] | None:
    """Ray versions of the raychaos results this run wrote; None when it wrote none.

    A raychaos result carries our excluded ``ray_version`` parameter or a ``claim`` label;
    results that started before ``since_ms`` are an earlier run's (nobody cleaned the
    directory) and do not count. Files older than the run are not even read.
    """
    found: set[str] | None = None
    for path in alluredir.glob("*-result.json"):
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_mtime * 1000 < since_ms - 2000:
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or int(data.get("start") or 0) < since_ms:
                continue
            version = ray_version_of(data)
            claimed = any(
                isinstance(x, dict) and x.get("name") == "claim" for x in data.get("labels") or []
            )
            if version is not None or claimed:
                found = (found or set()) | ({version} if version else set())
    return found


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    ray_version: str
    #: Where the Ray version came from (default, env, ini, option).
    ray_version_source: str
    image: str
    xdist_workers: int
    root: Path
    #: The run's Docker engines (URLs); empty: DOCKER_HOST, else the local socket.
    engines: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: pytest.Config) -> RunInfo:
        from chaos.backends.docker.images import ray_image_tag
        from chaos.keys import RUN_ID_KEY, SETTINGS_KEY

        settings = config.stash[SETTINGS_KEY]
        workers = getattr(config.option, "numprocesses", None) or len(
            getattr(config.option, "tx", None) or []
        )
        return cls(
            run_id=config.stash[RUN_ID_KEY],
            ray_version=settings.ray_version,
            ray_version_source=str(settings.sources.get("ray_versions")),
            image=settings.image or ray_image_tag(settings.ray_version, "3.11"),
            xdist_workers=int(workers or 0),
            root=config.rootpath,
            engines=settings.docker_hosts,
        )


def _build_url(env: Mapping[str, str]) -> str | None:
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("BUILD_URL") or env.get("CI_JOB_URL") or None


def executor(run_id: str, ray_version: str, env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": EXECUTOR,
        "type": "pytest",
        "buildName": f"raychaos run {run_id}",
        "reportName": f"Ray {ray_version} fault tolerance (raychaos)",
    }
    url = _build_url(env)
    if url:
        data["buildUrl"] = url
    return data


def _gib(value: object) -> str:
    try:
        return f"{int(str(value)) / 2**30:.1f} GiB"
    except ValueError:
        return "unknown"


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _docker_properties(image: str, url: str | None = None) -> dict[str, str]:
    """Docker server (of engine ``url``; None: DOCKER_HOST's) and the Ray images present
    (tag → id, digests when pulled)."""
    from chaos import labels
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.engines import default_url, display
    from chaos.errors import ChaosError

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
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.engines import assignment, describe_server, display
    from chaos.errors import ChaosError

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


def environment(info: RunInfo, versions: set[str]) -> dict[str, str]:
    """What ``environment.properties`` says about the run (Docker is asked, when reachable)."""
    from importlib.metadata import PackageNotFoundError, version

    props = {
        "raychaos.run": info.run_id,
        "ray.version": f"{info.ray_version} (from {info.ray_version_source})",
        "ray.versions.tested": ", ".join(sorted(versions)) or "none",
        "image": info.image,
    }
    with contextlib.suppress(PackageNotFoundError):
        props["raychaos.version"] = version("raychaos")
    props["pytest.version"] = pytest.__version__
    props["xdist.workers"] = str(info.xdist_workers) if info.xdist_workers else "0 (no xdist)"
    props["runner.python"] = platform.python_version()
    props["runner.platform"] = platform.platform()
    props["runner.cpus"] = str(os.cpu_count())
    with contextlib.suppress(ValueError, OSError, AttributeError):
        props["runner.memory"] = _gib(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    commit = _git(info.root, "rev-parse", "HEAD")
    if commit:
        dirty = _git(info.root, "status", "--porcelain", "--untracked-files=no")
        props["git.commit"] = commit + (" (uncommitted changes)" if dirty else "")
    urls = info.engines
    try:
        # docker.*: the run's first engine (the only one, unless several were given).
        props.update(_docker_properties(info.image, urls[0] if urls else None))
    except Exception as exc:  # noqa: BLE001 - docker-py and requests raise many types
        props["docker.server"] = f"unavailable: {exc!r}"
    if len(urls) > 1:
        props.update(_engine_properties(urls, info.xdist_workers))
    return props


_ABSENT = object()


def _read_json(path: Path) -> Any:
    """The JSON in ``path``; ``_ABSENT`` when there is no such file (or it is empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _ABSENT
    return json.loads(text) if text.strip() else _ABSENT


def write_run_files(alluredir: Path, info: RunInfo, versions: set[str]) -> list[str]:
    """Merge raychaos' run-level files into ``alluredir``; returns what it left alone, and why.

    * ``categories.json``: the repository's categories kept, ours added after them or
      replaced by name (:func:`chaos.report.categories.merge_categories`).
    * ``executor.json``: written when absent or written by raychaos; another's is kept.
    * ``environment.properties``: the repository's keys kept, ours added (ours replace the
      same key, :func:`chaos.report.properties.merge_properties`).

    A file that cannot be read or parsed is left as it is (and named in the result).
    """
    skipped: list[str] = []
    path = alluredir / "categories.json"
    try:
        existing = _read_json(path)
    except (OSError, ValueError) as exc:
        existing = exc
    if existing is _ABSENT or isinstance(existing, list):
        merged = merge_categories(existing if isinstance(existing, list) else [], CATEGORIES)
        write_atomic(path, json.dumps(merged, indent=1))
    else:
        skipped.append(f"{path.name} (not a JSON list of categories: {existing!r:.80})")
    path = alluredir / "executor.json"
    try:
        theirs = _read_json(path)
    except (OSError, ValueError) as exc:
        theirs = exc
    if theirs is _ABSENT or (isinstance(theirs, dict) and theirs.get("name") == EXECUTOR):
        data = executor(info.run_id, info.ray_version, os.environ)
        write_atomic(path, json.dumps(data, indent=1))
    elif not isinstance(theirs, dict):
        skipped.append(f"{path.name} (unreadable: {theirs!r:.80})")
    path = alluredir / "environment.properties"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, ValueError) as exc:
        skipped.append(f"{path.name} (unreadable: {exc!r:.80})")
        return skipped
    write_atomic(path, merge_properties(text, environment(info, versions)))
    return skipped
