"""Allure results a platform team can read, crash-safe under pytest-xdist (a pytest plugin).

What this adds to allure-pytest, and why:

* The controller (or the single process) cleans ``--alluredir`` once, at session start.
  ``--clean-alluredir`` runs in every xdist worker's ``pytest_configure`` — a replacement for a
  crashed worker too, mid-run — and so can delete results other workers already wrote.
* Run-level files, written by the controller only: ``categories.json`` and ``executor.json`` at
  session start (static), ``environment.properties`` at session finish (image ids and the Ray
  versions tested are known only then).
* A worker that dies mid-test leaves no Allure result: allure-pytest writes it at the end of the
  test protocol. pytest-xdist then calls ``pytest_handlecrashitem`` on the controller, which
  writes a ``broken`` result with the labels the test would have had. The controller collects
  no items under xdist, so it cannot read markers itself; instead every worker writes the
  labels of all its collected items to a manifest at collection finish, into a directory the
  controller hands out through ``workerinput``. Collection ends before the first test runs, so
  a crash in any phase (set-up included, where no report has been sent yet) finds its labels;
  and re-deriving from the nodeid would lose marks added by parametrisation or conftests.

Every hook runs inside :func:`_guard`: reporting warns, it never breaks a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chaos.report.claims import family
from chaos.report.html import CATEGORIES, PARAMETER

MANIFEST_INPUT = "raychaos_manifest_dir"
#: Allure's per-result files, removed once at session start (run-level files are rewritten).
STALE = (
    "*-result.json",
    "*-container.json",
    "*-attachment.*",
    "*-globals.json",
    "*.tmp",
    "environment.properties",
    "categories.json",
    "executor.json",
)
SEVERITIES = ["blocker", "critical", "normal", "minor", "trivial"]
#: Markers allure-pytest does not turn into tags (mirrors allure_pytest.utils).
_NOT_TAGS = {"usefixtures", "filterwarnings", "skip", "skipif", "xfail", "parametrize"}


@dataclass
class _State:
    #: Absolute --alluredir, or None when Allure output is off (then this plugin does nothing).
    alluredir: Path | None
    #: Controller: where workers write their manifests (created on the first worker).
    manifest_dir: Path | None = None
    #: Controller: crash results written, by path, rewritten at finish if a worker wiped them.
    crash_results: dict[Path, dict[str, Any]] = field(default_factory=dict)
    #: Controller: manifests read so far, by nodeid.
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)


STATE = pytest.StashKey[_State]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _say(config: pytest.Config, text: str) -> None:
    reporter = None if _is_worker(config) else config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text, yellow=True)
    else:
        # xdist workers' terminal output is not shown; their stderr reaches the console.
        stream = sys.__stderr__ or sys.stderr
        stream.write(text + "\n")
        stream.flush()


@contextlib.contextmanager
def _guard(config: pytest.Config, what: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
        _say(config, f"raychaos: WARNING: reporting could not {what}: {exc!r}")


def _state(config: pytest.Config) -> _State | None:
    state = config.stash.get(STATE, None)
    return state if state is not None and state.alluredir is not None else None


def _write_atomic(path: Path, text: str) -> None:
    # Allure's own logger writes the same way, so a reader never sees half a file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- labels a test carries (shared by the manifest and the crash result) --------------------
def claim_labels(claims: Sequence[str], story: str) -> list[tuple[str, str]]:
    """epic/feature/severity/story/claim labels, as chaos.plugin adds them while a test runs."""
    if not claims:
        return []
    families = [family(c) for c in claims]
    worst = min((f.severity for f in families), key=SEVERITIES.index)
    features = list(dict.fromkeys(f.feature for f in families))
    return [
        ("epic", "Ray fault tolerance"),
        *(("feature", f) for f in features),
        ("severity", worst),
        ("story", story),
        *(("claim", c) for c in claims),
    ]


def claim_links(claims: Sequence[str]) -> list[dict[str, str]]:
    docs = {family(c).feature: family(c).doc for c in claims}
    return [{"type": "link", "url": url, "name": f"Ray docs: {name}"} for name, url in docs.items()]


def _story(item: pytest.Item) -> str:
    obj = getattr(item, "obj", None)
    doc = (getattr(obj, "__doc__", None) or item.name).strip() if obj is not None else item.name
    return doc.splitlines()[0] if doc else item.name


def _allure_utils() -> tuple[Callable[..., str], Callable[[Any], str], Callable[[], str]]:
    """allure_commons' md5, represent, platform_label: typed here (allure ships them untyped)."""
    from allure_commons import utils

    return utils.md5, utils.represent, utils.platform_label


def item_facts(item: pytest.Item, ray_version: str) -> dict[str, Any]:
    """Everything of an Allure result that is known at collection, as allure-pytest names it."""
    from allure_pytest.utils import (
        allure_full_name,
        allure_labels,
        allure_links,
        allure_package,
        allure_suite_labels,
        allure_title_path,
    )

    md5, represent, platform_label = _allure_utils()
    claims = sorted({str(c) for m in item.iter_markers("claim") for c in m.args})
    callspec = getattr(item, "callspec", None)
    params: dict[str, Any] = dict(getattr(callspec, "params", {}) or {})
    full_name = str(allure_full_name(item))
    labels = [
        *claim_labels(claims, _story(item)),
        *((str(n), str(v)) for n, v in allure_labels(item)),
        *(
            ("tag", m.name)
            for m in item.iter_markers()
            if m.name not in _NOT_TAGS and not m.args and not m.kwargs
        ),
        *((str(n), str(v)) for n, v in allure_suite_labels(item)),
        ("framework", "pytest"),
        ("language", str(platform_label())),
        ("package", str(allure_package(item))),
    ]
    parameters: list[dict[str, Any]] = [
        {"name": k, "value": str(represent(v))} for k, v in params.items()
    ]
    if claims:
        parameters.append(
            {"name": PARAMETER, "value": str(represent(ray_version)), "excluded": True}
        )
    links = claim_links(claims) + [
        {"type": str(t), "url": str(u), "name": str(n)} for t, u, n in allure_links(item)
    ]
    obj = getattr(item, "obj", None)
    return {
        "name": item.name,
        "fullName": full_name,
        # allure-pytest's historyId: full name + non-excluded parameter values by name.
        "historyId": str(md5(full_name, *(params[k] for k in sorted(params)))),
        "testCaseId": str(md5(full_name)),
        "titlePath": [str(p) for p in allure_title_path(item)],
        "description": getattr(obj, "__doc__", None),
        "labels": [{"name": n, "value": v} for n, v in labels],
        "links": links,
        "parameters": parameters,
    }


def nodeid_facts(nodeid: str) -> dict[str, Any]:
    """The fallback when no manifest names the test: what the nodeid alone tells."""
    from allure_pytest.utils import ParsedPytestNodeId

    md5 = _allure_utils()[0]
    parsed = ParsedPytestNodeId(nodeid)
    classes = "." + ".".join(parsed.class_names) if parsed.class_names else ""
    full_name = f"{parsed.package}{classes}#{parsed.test_function}"
    suites = [("parentSuite", parsed.parent_package), ("suite", parsed.module)]
    return {
        "name": nodeid.split("::")[-1],
        "fullName": full_name,
        "historyId": str(md5(full_name)),
        "testCaseId": str(md5(full_name)),
        "titlePath": [p for p in [*parsed.path_segments, *parsed.class_names] if p],
        "labels": [
            {"name": n, "value": str(v)}
            for n, v in [*suites, ("framework", "pytest"), ("package", parsed.package)]
            if v
        ],
        "links": [],
        "parameters": [],
    }


def crash_result(
    nodeid: str, facts: Mapping[str, Any], message: str, worker: str, start: int, stop: int
) -> dict[str, Any]:
    """A ``broken`` Allure result for a test whose worker died."""
    labels = [
        *facts.get("labels", []),
        {"name": "host", "value": socket.gethostname()},
        {"name": "thread", "value": worker},
    ]
    return {
        **{k: v for k, v in facts.items() if v is not None},
        "uuid": str(uuid.uuid4()),
        "status": "broken",
        "stage": "finished",
        "statusDetails": {
            "message": message,
            "trace": (
                f"{message}\n\nThe pytest-xdist worker {worker} running {nodeid} died before "
                "the test finished (SIGKILL, the OOM killer, os._exit or a segfault), so "
                "pytest and allure-pytest recorded nothing; the raychaos controller wrote this "
                "result.\nTry: rerun the test alone (pytest -p no:xdist "
                f"'{nodeid}') and look for the OOM killer in `dmesg`."
            ),
        },
        "start": start,
        "stop": stop,
        "labels": labels,
    }


# -- run-level files --------------------------------------------------------------------------
def _escape_key(key: str) -> str:
    return "".join("\\" + c if c in "\\=: #!" else c for c in key)


def format_properties(props: Mapping[str, str]) -> str:
    lines = []
    for key, value in props.items():
        flat = " ".join(str(value).split()).replace("\\", "\\\\")
        lines.append(f"{_escape_key(key)}={flat}")
    return "\n".join(lines) + "\n"


def _build_url(env: Mapping[str, str]) -> str | None:
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return env.get("BUILD_URL") or env.get("CI_JOB_URL") or None


def executor(run_id: str, ray_version: str, env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "raychaos",
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


def tested_versions(alluredir: Path) -> list[str]:
    """The ray_version parameters of the results in ``alluredir``."""
    from chaos.report.html import _unquote

    found: set[str] = set()
    for path in alluredir.glob("*-result.json"):
        with contextlib.suppress(OSError, ValueError):
            for param in json.loads(path.read_text(encoding="utf-8")).get("parameters", []):
                if param.get("name") == PARAMETER:
                    found.add(_unquote(str(param.get("value", ""))))
    return sorted(found)


def _docker_properties(image: str) -> dict[str, str]:
    """Docker server and the Ray images present (tag → id, digests when pulled)."""
    from chaos import labels
    from chaos.backends.docker.client import connect
    from chaos.errors import ChaosError

    try:
        client = connect(timeout=10)
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
        props["docker.host"] = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
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


def environment(config: pytest.Config, alluredir: Path) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from chaos.backends.docker.images import ray_image_tag
    from chaos.plugin import RUN_ID_KEY, SETTINGS_KEY

    settings = config.stash[SETTINGS_KEY]
    image = settings.image or ray_image_tag(settings.ray_version, "3.11")
    workers = getattr(config.option, "numprocesses", None) or len(
        getattr(config.option, "tx", None) or []
    )
    props = {
        "raychaos.run": config.stash[RUN_ID_KEY],
        "ray.version": f"{settings.ray_version} (from {settings.sources.get('ray_version')})",
        "ray.versions.tested": ", ".join(tested_versions(alluredir)) or "none",
        "image": image,
    }
    with contextlib.suppress(PackageNotFoundError):
        props["raychaos.version"] = version("raychaos")
    props["pytest.version"] = pytest.__version__
    props["xdist.workers"] = str(workers) if workers else "0 (no xdist)"
    props["runner.python"] = platform.python_version()
    props["runner.platform"] = platform.platform()
    props["runner.cpus"] = str(os.cpu_count())
    with contextlib.suppress(ValueError, OSError, AttributeError):
        props["runner.memory"] = _gib(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    commit = _git(config.rootpath, "rev-parse", "HEAD")
    if commit:
        dirty = _git(config.rootpath, "status", "--porcelain", "--untracked-files=no")
        props["git.commit"] = commit + (" (uncommitted changes)" if dirty else "")
    try:
        props.update(_docker_properties(image))
    except Exception as exc:  # noqa: BLE001 - docker-py and requests raise many types
        props["docker.server"] = f"unavailable: {exc!r}"
    return props


def _write_static(config: pytest.Config, alluredir: Path) -> None:
    from chaos.plugin import RUN_ID_KEY, SETTINGS_KEY

    _write_atomic(
        alluredir / "categories.json",
        json.dumps([c.to_allure() for c in CATEGORIES], indent=1),
    )
    settings = config.stash[SETTINGS_KEY]
    _write_atomic(
        alluredir / "executor.json",
        json.dumps(executor(config.stash[RUN_ID_KEY], settings.ray_version, os.environ), indent=1),
    )


def clean(alluredir: Path) -> int:
    """Remove the previous run's Allure files (not history/ or anything else); returns count."""
    removed = 0
    for pattern in STALE:
        for path in alluredir.glob(pattern):
            if path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
    return removed


# -- hooks -------------------------------------------------------------------------------------
@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    with _guard(config, "read --alluredir"):
        raw = config.getoption("allure_report_dir", None)
        # allure-pytest resolves the directory against the working directory the same way.
        config.stash[STATE] = _State(Path(os.path.abspath(raw)) if raw else None)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → each worker: where to write its collection manifest."""
    config: pytest.Config = node.config
    state = _state(config)
    if state is None:
        return
    with _guard(config, "prepare the collection manifest"):
        if state.manifest_dir is None:
            state.manifest_dir = Path(tempfile.mkdtemp(prefix="raychaos-manifest-"))
        node.workerinput[MANIFEST_INPUT] = str(state.manifest_dir)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Controller: clean the alluredir once, before xdist starts any worker; static files."""
    config = session.config
    state = _state(config)
    if state is None or _is_worker(config) or config.option.collectonly:
        return
    assert state.alluredir is not None
    with _guard(config, f"clean {state.alluredir}"):
        state.alluredir.mkdir(parents=True, exist_ok=True)
        clean(state.alluredir)
    with _guard(config, "write categories.json and executor.json"):
        _write_static(config, state.alluredir)
    if getattr(config.option, "clean_alluredir", False) and getattr(
        config.option, "numprocesses", None
    ):
        _say(
            config,
            "raychaos: WARNING: --clean-alluredir under -n runs in every xdist worker, also in "
            "one that replaces a crashed worker mid-run, and can delete results already "
            "written; raychaos cleans the alluredir once at session start, drop the flag",
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Claim labels for a test that never reaches its call phase (set-up broke or skipped).

    chaos.plugin labels in ``pytest_runtest_call``; without this, an experiment whose cluster
    failed to boot would carry no claim and the matrix would show it as "not run".
    """
    report = yield
    if report.when == "setup" and not report.passed and _state(item.config) is not None:
        with _guard(item.config, f"label {item.nodeid}"):
            _label_now(item)
    return report


def _label_now(item: pytest.Item) -> None:
    claims = sorted({str(c) for m in item.iter_markers("claim") for c in m.args})
    if not claims:
        return
    import allure

    from chaos.plugin import SETTINGS_KEY

    # Typed aliases: allure ships these two unannotated.
    label: Callable[[str, str], None] = allure.dynamic.label
    link: Callable[..., None] = allure.dynamic.link
    for name, value in claim_labels(claims, _story(item)):
        label(name, value)
    for doc in claim_links(claims):
        link(doc["url"], name=doc["name"])
    version = item.config.stash[SETTINGS_KEY].ray_version
    allure.dynamic.parameter(PARAMETER, version, excluded=True)


@pytest.hookimpl
def pytest_collection_finish(session: pytest.Session) -> None:
    """Worker: the labels of every collected item, for the controller should this worker die."""
    config = session.config
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or MANIFEST_INPUT not in workerinput or _state(config) is None:
        return
    with _guard(config, "write the collection manifest"):
        from chaos.plugin import SETTINGS_KEY

        ray_version = config.stash[SETTINGS_KEY].ray_version
        manifest = {item.nodeid: item_facts(item, ray_version) for item in session.items}
        path = Path(workerinput[MANIFEST_INPUT]) / f"{workerinput.get('workerid', 'gw')}.json"
        _write_atomic(path, json.dumps(manifest, default=repr))


#: nodeid → start (ms), the start of a crash result. Module-level because
#: pytest_runtest_logstart gets no config to reach the stash; only the latest start matters.
_STARTS: dict[str, int] = {}


@pytest.hookimpl
def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _STARTS[nodeid] = _now_ms()


def _facts_for(state: _State, nodeid: str, worker: str) -> dict[str, Any] | None:
    if nodeid not in state.facts and state.manifest_dir is not None:
        # The crashed worker's own manifest first, then any other (all collect the same items).
        paths = sorted(state.manifest_dir.glob("*.json"), key=lambda p: p.stem != worker)
        for path in paths:
            with contextlib.suppress(OSError, ValueError):
                state.facts.update(json.loads(path.read_text(encoding="utf-8")))
            if nodeid in state.facts:
                break
    return state.facts.get(nodeid)


@pytest.hookimpl(optionalhook=True, trylast=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    """xdist controller: a worker died running ``crashitem``; write its broken result."""
    node = getattr(report, "node", None)
    config: pytest.Config | None = getattr(node, "config", None)
    if config is None or getattr(report, "outcome", None) == "rerun":
        return  # not ours to tell, or another plugin (rerunfailures) runs it again
    state = _state(config)
    if state is None:
        return
    with _guard(config, f"write the result of crashed {crashitem}"):
        assert state.alluredir is not None
        worker = str(getattr(getattr(node, "gateway", None), "id", "gw?"))
        facts = _facts_for(state, crashitem, worker)
        if facts is None:
            _say(
                config,
                f"raychaos: WARNING: no collection manifest names {crashitem}; its crash result "
                "carries no claim labels",
            )
            facts = nodeid_facts(crashitem)
        stop = _now_ms()
        result = crash_result(
            crashitem, facts, str(report.longrepr), worker, _STARTS.get(crashitem, stop), stop
        )
        path = state.alluredir / f"{result['uuid']}-result.json"
        _write_atomic(path, json.dumps(result, indent=1))
        state.crash_results[path] = result


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Controller: environment.properties, and what a late worker's clean may have removed."""
    config = session.config
    state = _state(config)
    if state is None or _is_worker(config) or config.option.collectonly:
        return
    assert state.alluredir is not None
    alluredir = state.alluredir
    with _guard(config, "keep the crash results"):
        for path, result in state.crash_results.items():
            if not path.exists():
                _write_atomic(path, json.dumps(result, indent=1))
    with _guard(config, "write categories.json and executor.json"):
        if (
            not (alluredir / "categories.json").exists()
            or not (alluredir / "executor.json").exists()
        ):
            _write_static(config, alluredir)
    with _guard(config, "write environment.properties"):
        _write_atomic(
            alluredir / "environment.properties", format_properties(environment(config, alluredir))
        )


@pytest.hookimpl
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.manifest_dir is not None:
        shutil.rmtree(state.manifest_dir, ignore_errors=True)
