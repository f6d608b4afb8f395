"""Allure output of raychaos tests, crash-safe under pytest-xdist: the pytest hooks.

:mod:`chaos.plugin` registers this module. What it adds to allure-pytest, and why:

* Labels: every raychaos test (:func:`chaos.plugin.items.uses_raychaos`) gets its claim
  labels, documentation links and the excluded ``ray_version`` parameter at the end of its
  set-up, so a test whose cluster never booted still carries its claims.
* Crash results: a worker that dies mid-test leaves no Allure result (allure-pytest writes it
  at the end of the test protocol). pytest-xdist then calls ``pytest_handlecrashitem`` on the
  controller, which writes a ``broken`` result with the labels and identity the test would
  have had. The controller collects no items under xdist, so every worker writes the facts
  of its raychaos tests to a manifest at collection finish, into a directory the controller
  hands out through ``workerinput``. Collection ends before the first test runs, so a crash
  in any phase finds its facts; re-deriving them from the nodeid would lose marks added by
  parametrisation or conftests.
* A strict xfail that passed (a recorded finding that no longer reproduces): pytest fails
  it with ``[XPASS(strict)] <reason>`` but raises nothing, and allure-pytest writes it as
  failed with no message at all, which no category can match. Its result gets pytest's line
  as its message (through allure-commons' ``report_result`` hook, before the file is
  written), so Allure files it under "Finding no longer reproduces", never as a failure.
* A recorded finding (:func:`chaos.plugin.allure_labels.finding_of`: the exception a strict
  ``FINDING:`` xfail names in ``raises=``, or a non-strict one naming an
  :class:`~chaos.errors.Intermittent`) gets the ``raychaos.finding`` label, which is what
  coverage counts, beside the ``raychaos.finding.claim`` labels of set-up (the claims it is
  about). An intermittent one's message becomes ``XFAIL INTERMITTENT FINDING (<class>): …``,
  its own Allure category. If the teardown then fails (INV-01 or INV-02 after the finding, a heal),
  the result becomes that failure: allure-pytest lets a teardown failure override only a
  passed result, so it would stay "skipped: XFAIL FINDING" and count the finding and the
  postconditions as accounted for.
* Run-level files (``categories.json``, ``executor.json``, ``environment.properties``,
  ``raychaos-cpu.json``), written by the controller (or the single process) at session
  finish; the host's CPU counters for the last one are read at configure and at finish.

Inert unless used: nothing happens without ``--alluredir``; only raychaos tests are labelled,
listed or given crash results; the run-level files are merged into the directory only when
this run's raychaos tests left results there. The directory is never cleaned here: that is
allure-pytest's ``--clean-alluredir``, the user's choice. Every hook runs inside
:func:`_guard`: reporting warns, it never breaks a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import allure_commons
import pytest

from chaos.errors import Intermittent
from chaos.plugin.allure_labels import finding_of, label_running_test
from chaos.plugin.items import engine_of, evidence_dir, ran_raychaos, uses_raychaos, version_of
from chaos.plugin.keys import INCONCLUSIVE_KEY, SETTINGS_KEY
from chaos.plugin.results import identity
from chaos.plugin.results.crash import Replay, crash_result, item_facts
from chaos.plugin.results.hostcpu import host_cpu, sample_host
from chaos.plugin.results.runfiles import RunInfo, raychaos_versions, write_atomic, write_run_files
from chaos.plugin.seed import SEED_KEY
from chaos.report.categories import INTERMITTENT_PREFIX
from chaos.report.claims import FINDING_LABEL, INCONCLUSIVE_LABEL
from chaos.report.hostcpu import HostSample

MANIFEST_INPUT = "raychaos_manifest_dir"
#: pytest's report of a strict xfail whose test passed.
XPASS_STRICT = "[XPASS(strict)]"
XPASS_TRACE = (
    "{message}\n\nThe experiment of a recorded finding passed: every assertion held, so "
    "Ray behaved as documented on this run (a fix in this release, or the experiment no "
    "longer sees the difference). pytest fails a strict xfail that passes so the marker is "
    "not forgotten. Check the evidence (steps, timeline, measurements), then remove the "
    "xfail marker, or keep the finding and say why it does not always reproduce."
)


@dataclass
class _State:
    #: Absolute --alluredir.
    alluredir: Path
    #: When this process configured (ms): results that started earlier are an earlier run's.
    started_ms: int
    #: Controller: the host's CPU counters when it configured (:mod:`chaos.plugin.results.hostcpu`).
    cpu_start: HostSample | None = None
    #: Controller: where workers write their manifests (created on the first worker).
    manifest_dir: Path | None = None
    #: Controller: crash results written, by path, rewritten at finish if a worker wiped them.
    crash_results: dict[Path, dict[str, Any]] = field(default_factory=dict)
    #: Controller: manifests read so far (raychaos tests only), by nodeid.
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Controller: whether any manifest could be read (else a crash cannot be told ours).
    manifests_read: bool = False
    #: Controller: warnings of session finish, shown in the terminal summary.
    notes: list[str] = field(default_factory=list)
    #: Fixes results before they are written (registered with allure-commons).
    fixes: _ResultFixes | None = None


@dataclass
class _Finding:
    """A test that raised its recorded finding: the exception's class, and what its teardown
    then raised as Allure would say it (status, message, trace), if it failed."""

    exception: str
    teardown: tuple[str, str, str] | None = None
    #: A race or crash inside Ray (:class:`chaos.errors.Intermittent`): its own category.
    intermittent: bool = False


class _ResultFixes:
    """An allure-commons plugin: what raychaos sets on a result before allure-pytest's file
    logger writes it (``tryfirst``): a strict xpass's message, a finding's label, and the
    teardown failure that voids a finding."""

    def __init__(self) -> None:
        #: fullName → pytest's "[XPASS(strict)] …" line, for the test that just ran.
        self.pending: dict[str, str] = {}
        #: fullName → the recorded finding the test that just ran raised.
        self.findings: dict[str, _Finding] = {}
        #: fullName → the stall that made the test that just ran inconclusive.
        self.inconclusive: dict[str, tuple[str, str]] = {}

    @allure_commons.hookimpl(tryfirst=True)
    def report_result(self, result: Any) -> None:
        name = str(getattr(result, "fullName", ""))
        stalled = self.inconclusive.pop(name, None)
        if stalled is not None:
            _mark_inconclusive(result, *stalled)
        finding = self.findings.pop(name, None)
        if finding is not None:
            _mark_finding(result, finding)
        message = self.pending.pop(name, None)
        if message is None or getattr(result, "status", None) != "failed":
            return
        if getattr(result, "statusDetails", None):
            return  # allure-pytest said something itself: keep it
        from allure_commons.model2 import StatusDetails

        result.statusDetails = StatusDetails(
            message=message, trace=XPASS_TRACE.format(message=message)
        )


def _mark_inconclusive(result: Any, stall: str, message: str) -> None:
    """A body judged on a host too busy to judge: broken, the stall named (a skip for pytest,
    so the run's exit status stays Ray's)."""
    from allure_commons.model2 import Label, StatusDetails

    if getattr(result, "status", None) not in ("skipped", "broken"):
        return  # a teardown failure after it decided the result: keep that
    result.status = "broken"
    result.labels.append(Label(name=INCONCLUSIVE_LABEL, value=stall))
    result.statusDetails = StatusDetails(message=message, trace=message)


def _mark_finding(result: Any, finding: _Finding) -> None:
    from allure_commons.model2 import Label, StatusDetails

    result.labels.append(Label(name=FINDING_LABEL, value=finding.exception))
    details = getattr(result, "statusDetails", None)
    message = str(getattr(details, "message", None) or "")
    if details is not None and finding.intermittent and message.startswith("XFAIL FINDING:"):
        details.message = (
            f"{INTERMITTENT_PREFIX} ({finding.exception}):{message[len('XFAIL FINDING:') :]}"
        )
    if finding.teardown is None or getattr(result, "status", None) != "skipped":
        return
    status, message, trace = finding.teardown
    was = getattr(getattr(result, "statusDetails", None), "message", None) or "a finding"
    result.status = status
    result.statusDetails = StatusDetails(
        message=f"{message}\n\nAfter the body's recorded finding ({was.splitlines()[0]}): "
        "a teardown that fails voids it, and the postconditions it checks.",
        trace=trace,
    )


def _register_fixes(state: _State) -> None:
    fixes = _ResultFixes()
    allure_commons.plugin_manager.register(fixes)
    state.fixes = fixes


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
    return config.stash.get(STATE, None)


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.hookimpl
def pytest_configure(config: pytest.Config) -> None:
    with _guard(config, "read --alluredir"):
        raw = config.getoption("allure_report_dir", None)
        if raw:
            # allure-pytest resolves the directory against the working directory the same way.
            config.stash[STATE] = _State(
                Path(os.path.abspath(raw)),
                _now_ms(),
                cpu_start=None if _is_worker(config) else sample_host(),
            )
    state = _state(config)
    if state is not None:
        with _guard(config, "register the strict-xpass message"):
            _register_fixes(state)


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


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Label a raychaos test once its set-up ends, passed, failed or skipped.

    tryfirst makes this the outermost wrapper: allure-pytest's own set-up wrapper has then
    filled in the result (and its parametrisation), so ``ray_version`` comes after those.
    """
    try:
        return (yield)
    finally:
        if _state(item.config) is not None:
            with _guard(item.config, f"label {item.nodeid}"):
                if ran_raychaos(item):
                    label_running_test(
                        item, version_of(item) or item.config.stash[SETTINGS_KEY].ray_version
                    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note a raychaos test's strict xfail that passed, its recorded finding, and a teardown
    failure after that finding, for :class:`_ResultFixes`.

    tryfirst makes this the outermost wrapper: it reads the report as
    :mod:`chaos.plugin.hooks` left it (a teardown failure after a finding stays a failure)."""
    report = yield
    state = _state(item.config)
    if state is None or state.fixes is None:
        return report
    fixes = state.fixes
    if (
        report.when == "call"
        and report.failed
        and call.excinfo is None
        and isinstance(report.longrepr, str)
        and report.longrepr.startswith(XPASS_STRICT)
    ):
        with _guard(item.config, f"note the strict xpass of {item.nodeid}"):
            if ran_raychaos(item):
                fixes.pending[identity.full_name(item)] = report.longrepr.strip()
    elif report.when in ("setup", "call") and report.skipped and INCONCLUSIVE_KEY in item.stash:
        with _guard(item.config, f"note the inconclusive verdict of {item.nodeid}"):
            message = str(call.excinfo.value) if call.excinfo is not None else ""
            fixes.inconclusive[identity.full_name(item)] = (item.stash[INCONCLUSIVE_KEY], message)
    elif report.when == "call" and report.skipped and call.excinfo is not None:
        with _guard(item.config, f"note the finding of {item.nodeid}"):
            found = finding_of(item, call.excinfo.value) if hasattr(report, "wasxfail") else None
            if found is not None and ran_raychaos(item):
                fixes.findings[identity.full_name(item)] = _Finding(
                    found, intermittent=isinstance(call.excinfo.value, Intermittent)
                )
    elif report.when == "teardown" and call.excinfo is not None:
        with _guard(item.config, f"note the teardown failure of {item.nodeid}"):
            finding = fixes.findings.get(identity.full_name(item))
            if finding is not None:
                error = call.excinfo.value
                failed = isinstance(error, AssertionError | pytest.fail.Exception)
                finding.teardown = (
                    "failed" if failed else "broken",
                    call.excinfo.exconly(),
                    report.longreprtext,
                )
    return report


@pytest.hookimpl
def pytest_collection_finish(session: pytest.Session) -> None:
    """Worker: the facts of its raychaos tests, for the controller should this worker die.

    Written when there are none too: an empty manifest tells the controller a crashed test
    was not a raychaos test, a missing one that it cannot tell.
    """
    config = session.config
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or MANIFEST_INPUT not in workerinput or _state(config) is None:
        return
    with _guard(config, "write the collection manifest"):
        ray_version = config.stash[SETTINGS_KEY].ray_version
        manifest = {
            item.nodeid: item_facts(item, version_of(item) or ray_version, engine_of(item))
            for item in session.items
            if uses_raychaos(item)
        }
        path = Path(workerinput[MANIFEST_INPUT]) / f"{workerinput.get('workerid', 'gw')}.json"
        write_atomic(path, json.dumps(manifest, default=repr))


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
                state.manifests_read = True
            if nodeid in state.facts:
                break
    return state.facts.get(nodeid)


def _checkpointed_history(config: pytest.Config, state: _State, nodeid: str) -> str | None:
    """The history a crashed test's worker checkpointed in this run, copied into the results
    as an attachment (its source name), else None."""
    from chaos.experiment.kit import history_path

    path = history_path(evidence_dir(config), nodeid)
    try:
        if path.stat().st_mtime * 1000 < state.started_ms:
            return None  # an earlier run's
        source = f"{uuid.uuid4()}-attachment.json"
        state.alluredir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, state.alluredir / source)
    except OSError:
        return None
    return source


@pytest.hookimpl(optionalhook=True, trylast=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    """xdist controller: a worker died running ``crashitem``; if ours, write its result."""
    node = getattr(report, "node", None)
    config: pytest.Config | None = getattr(node, "config", None)
    if config is None or getattr(report, "outcome", None) == "rerun":
        return  # not ours to tell, or another plugin (rerunfailures) runs it again
    state = _state(config)
    if state is None:
        return
    with _guard(config, f"write the result of crashed {crashitem}"):
        worker = str(getattr(getattr(node, "gateway", None), "id", "gw?"))
        facts = _facts_for(state, crashitem, worker)
        if facts is None:
            if not state.manifests_read:
                _say(
                    config,
                    f"raychaos: WARNING: no collection manifest could be read; if crashed "
                    f"{crashitem} was a raychaos test, it has no Allure result",
                )
            return  # not a raychaos test: allure-pytest's business, not ours
        stop = _now_ms()
        replay = Replay(
            seed=config.stash.get(SEED_KEY, None),
            history_source=_checkpointed_history(config, state, crashitem),
        )
        result = crash_result(
            crashitem,
            facts,
            str(report.longrepr),
            worker,
            _STARTS.get(crashitem, stop),
            stop,
            replay,
        )
        path = state.alluredir / f"{result['uuid']}-result.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(result, indent=1))
        state.crash_results[path] = result


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Controller: the run-level files, if raychaos tests of this run left results."""
    config = session.config
    state = _state(config)
    if state is None or _is_worker(config) or config.option.collectonly:
        return
    with _guard(config, "keep the crash results"):
        # A replacement worker's --clean-alluredir may have removed them.
        for path, result in state.crash_results.items():
            if not path.exists():
                write_atomic(path, json.dumps(result, indent=1))
    versions: set[str] | None = None
    with _guard(config, f"read {state.alluredir}"):
        if state.alluredir.is_dir():
            versions = raychaos_versions(state.alluredir, state.started_ms)
    if versions is None:
        return  # no raychaos test ran: the directory is the repository's alone
    if getattr(config.option, "clean_alluredir", False) and getattr(
        config.option, "numprocesses", None
    ):
        state.notes.append(
            "raychaos: WARNING: --clean-alluredir under -n cleans in every xdist worker, also in "
            "one replacing a crashed worker mid-run, and can delete results already written; "
            "clean the directory before the run instead"
        )
    with _guard(config, "write categories.json, executor.json, environment.properties…"):
        skipped = write_run_files(state.alluredir, _run_info(config), versions)
        state.notes += [f"raychaos: WARNING: left {what} in {state.alluredir}" for what in skipped]


def _run_info(config: pytest.Config) -> RunInfo:
    """The run as the run-level files describe it; its engines are asked here, since the
    report layer never talks to one."""
    from chaos.plugin.backend import engine_properties, engine_urls, node_image_tag
    from chaos.plugin.keys import RUN_ID_KEY

    settings = config.stash[SETTINGS_KEY]
    state = _state(config)
    # The finish sample first: asking the engines below takes CPU and seconds of its own.
    cpu = host_cpu(state.cpu_start, engine_urls(settings.docker_hosts)) if state else None
    workers = getattr(config.option, "numprocesses", None) or len(
        getattr(config.option, "tx", None) or []
    )
    image = settings.image or node_image_tag(settings.ray_version, "3.11")
    return RunInfo(
        run_id=config.stash[RUN_ID_KEY],
        ray_version=settings.ray_version,
        ray_version_source=str(settings.sources.get("ray_versions")),
        image=image,
        xdist_workers=int(workers or 0),
        root=config.rootpath,
        engines=settings.docker_hosts,
        engine=engine_properties(image, settings.docker_hosts, int(workers or 0)),
        host_cpu=cpu,
        team_claims=_team_claims(),
    )


def _team_claims() -> str:
    """The text of the team's claim catalogue in effect ("" without one): validated at
    configure, so a read that fails now leaves the copy out rather than the run files."""
    from chaos.report.catalogue import team_file

    path = team_file()
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


@pytest.hookimpl
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Session-finish warnings, after the progress line (not on it)."""
    state = _state(config)
    while state is not None and state.notes:
        terminalreporter.write_line(state.notes.pop(0), yellow=True)


@pytest.hookimpl
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        if state.fixes is not None:
            with _guard(config, "unregister the strict-xpass message"):
                allure_commons.plugin_manager.unregister(state.fixes)
        for note in state.notes:  # no terminal summary (-p no:terminal)
            _say(config, note)
        if state.manifest_dir is not None:
            shutil.rmtree(state.manifest_dir, ignore_errors=True)
    _STARTS.clear()
