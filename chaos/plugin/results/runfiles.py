"""Allure's run-level files: ``categories.json``, ``executor.json``, ``environment.properties``,
and raychaos' own ``raychaos-cpu.json`` (the host's busy CPU over the run).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chaos.report.catalogue import RESULTS_COPY
from chaos.report.categories import CATEGORIES, merge_categories
from chaos.report.files import allure_files, read_json
from chaos.report.hostcpu import CPU_FILE, HostCpu
from chaos.report.model import ray_version_of
from chaos.report.properties import merge_properties

#: The executor's name, and the start of it with a CI: how raychaos knows its own file.
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
    for path in allure_files(alluredir):
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_mtime * 1000 < since_ms - 2000:
                continue
            data = read_json(path)
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
    #: What those engines said of themselves (``docker.*``, ``image.*``, ``engine.*``), asked
    #: by the plugin: the report never talks to an engine.
    engine: Mapping[str, str] = field(default_factory=dict)
    #: The host's CPU counters at session start and finish (:mod:`chaos.report.hostcpu`).
    host_cpu: HostCpu | None = None
    #: The team's claim catalogue in effect (its text), copied beside the results so the
    #: readers know the run's claims ("" = raychaos' only).
    team_claims: str = ""


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _github(env: Mapping[str, str]) -> dict[str, Any] | None:
    """GitHub Actions' default variables (``GITHUB_*``)."""
    if not (env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY")):
        return None
    repo = f"{env.get('GITHUB_SERVER_URL') or 'https://github.com'}/{env['GITHUB_REPOSITORY']}"
    run = f"{repo}/actions/runs/{env['GITHUB_RUN_ID']}"
    attempt = _number(env.get("GITHUB_RUN_ATTEMPT"))
    number = env.get("GITHUB_RUN_NUMBER") or env["GITHUB_RUN_ID"]
    name = f"{env.get('GITHUB_WORKFLOW') or env['GITHUB_REPOSITORY']} #{number}"
    if env.get("GITHUB_JOB"):
        name += f" {env['GITHUB_JOB']}"
    return {
        "name": f"{EXECUTOR} (GitHub Actions)",
        "type": "github",
        "url": repo,
        "buildOrder": _number(env.get("GITHUB_RUN_NUMBER")),
        "buildName": name + (f" (attempt {attempt})" if attempt and attempt > 1 else ""),
        "buildUrl": f"{run}/attempts/{attempt}" if attempt and attempt > 1 else run,
    }


def _gitlab(env: Mapping[str, str]) -> dict[str, Any] | None:
    """GitLab CI's predefined variables (``CI_*``)."""
    if not (env.get("GITLAB_CI") or env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL")):
        return None
    project = env.get("CI_PROJECT_PATH") or env.get("CI_PROJECT_NAME") or "GitLab CI"
    number = env.get("CI_PIPELINE_IID") or env.get("CI_PIPELINE_ID") or "?"
    job = f" {env['CI_JOB_NAME']}" if env.get("CI_JOB_NAME") else ""
    return {
        "name": f"{EXECUTOR} (GitLab CI)",
        "type": "gitlab",
        "url": env.get("CI_PROJECT_URL") or env.get("CI_SERVER_URL"),
        "buildOrder": _number(env.get("CI_PIPELINE_IID") or env.get("CI_PIPELINE_ID")),
        "buildName": f"{project} pipeline #{number}{job}",
        "buildUrl": env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL"),
    }


def _jenkins(env: Mapping[str, str]) -> dict[str, Any] | None:
    """Jenkins' environment (``BUILD_URL``, ``JOB_NAME``, ``BUILD_NUMBER``)."""
    if not (env.get("JENKINS_URL") or (env.get("BUILD_URL") and env.get("JOB_NAME"))):
        return None
    job = env.get("JOB_NAME") or "Jenkins job"
    return {
        "name": f"{EXECUTOR} (Jenkins)",
        "type": "jenkins",
        "url": env.get("JOB_URL") or env.get("JENKINS_URL"),
        "buildOrder": _number(env.get("BUILD_NUMBER")),
        "buildName": f"{job} #{env.get('BUILD_NUMBER') or env.get('BUILD_ID') or '?'}",
        "buildUrl": env.get("BUILD_URL"),
    }


def _generic_ci(env: Mapping[str, str]) -> dict[str, Any] | None:
    """Any other CI: ``CI`` set, with ``BUILD_URL`` / ``BUILD_NUMBER`` / ``BUILD_ID`` if any."""
    if env.get("CI", "").lower() not in ("true", "1", "yes"):
        return None
    number = env.get("BUILD_NUMBER") or env.get("BUILD_ID")
    return {
        "name": f"{EXECUTOR} (CI)",
        "type": "ci",
        "buildOrder": _number(env.get("BUILD_NUMBER")),
        "buildName": f"CI build #{number}" if number else None,
        "buildUrl": env.get("BUILD_URL"),
    }


def executor(run_id: str, ray_version: str, env: Mapping[str, str]) -> dict[str, Any]:
    """``executor.json``: the CI build that ran the suite (GitHub Actions, GitLab CI, Jenkins,
    any other CI setting ``CI``), from its variables; else this machine's run.

    The name starts with ``raychaos`` (how a later run knows the file is its own); the run id
    is in the build name, so a report leads back to ``reports/timelines`` and the reaper logs.
    """
    data: dict[str, Any] = {
        "name": EXECUTOR,
        "type": "pytest",
        "buildName": f"raychaos run {run_id}",
        "reportName": f"Ray {ray_version} fault tolerance (raychaos)",
    }
    for detect in (_github, _gitlab, _jenkins, _generic_ci):
        found = detect(env)
        if found is not None:
            build = found.pop("buildName", None)
            data.update({k: v for k, v in found.items() if v is not None})
            if build:
                data["buildName"] = f"{build} (raychaos run {run_id})"
            break
    return data


def ours(executor_json: object) -> bool:
    """Whether an ``executor.json`` (parsed) was written by raychaos."""
    name = executor_json.get("name") if isinstance(executor_json, dict) else None
    return isinstance(name, str) and (name == EXECUTOR or name.startswith(f"{EXECUTOR} ("))


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


def environment(info: RunInfo, versions: set[str]) -> dict[str, str]:
    """What ``environment.properties`` says about the run (the engines: as the plugin asked)."""
    from importlib.metadata import PackageNotFoundError, version

    from chaos.check.expectations import beyond_read

    props = {
        "raychaos.run": info.run_id,
        "ray.version": f"{info.ray_version} (from {info.ray_version_source})",
        "ray.versions.tested": ", ".join(sorted(versions)) or "none",
        "image": info.image,
    }
    if beyond := [note for v in sorted(versions) if (note := beyond_read(v))]:
        props["ray.expectations"] = "; ".join(beyond)
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
    props.update(info.engine)
    return props


_ABSENT = object()


def _existing(path: Path) -> Any:
    """The JSON in ``path``; ``_ABSENT`` when there is no such file (or it is empty)."""
    try:
        return read_json(path)
    except FileNotFoundError:
        return _ABSENT
    except json.JSONDecodeError as exc:
        if not exc.doc.strip():
            return _ABSENT
        raise


def write_run_files(alluredir: Path, info: RunInfo, versions: set[str]) -> list[str]:
    """Merge raychaos' run-level files into ``alluredir``; returns what it left alone, and why.

    * ``categories.json``: the repository's categories kept, ours added after them or
      replaced by name (:func:`chaos.report.categories.merge_categories`).
    * ``executor.json``: written when absent or written by raychaos (:func:`executor`: the
      CI build from its variables); a team's own (any other name) is kept.
    * ``environment.properties``: the repository's keys kept, ours added (ours replace the
      same key, :func:`chaos.report.properties.merge_properties`).
    * ``raychaos-cpu.json``: the run's host CPU record, replaced (it is raychaos' alone).
    * ``raychaos-claims.toml``: the team's claim catalogue, when the run had one (replaced).

    A file that cannot be read or parsed is left as it is (and named in the result).
    """
    skipped: list[str] = []
    if info.host_cpu is not None:
        write_atomic(alluredir / CPU_FILE, json.dumps(info.host_cpu.to_json(), indent=1))
    if info.team_claims:
        write_atomic(alluredir / RESULTS_COPY, info.team_claims)
    path = alluredir / "categories.json"
    try:
        existing = _existing(path)
    except (OSError, ValueError) as exc:
        existing = exc
    if existing is _ABSENT or isinstance(existing, list):
        merged = merge_categories(existing if isinstance(existing, list) else [], CATEGORIES)
        write_atomic(path, json.dumps(merged, indent=1))
    else:
        skipped.append(f"{path.name} (not a JSON list of categories: {existing!r:.80})")
    path = alluredir / "executor.json"
    try:
        theirs = _existing(path)
    except (OSError, ValueError) as exc:
        theirs = exc
    if theirs is _ABSENT or ours(theirs):
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
