"""The hooks around each test's phases: one wrapper per phase, its pieces in a stated order.

Several concerns act on the same phase (a lost engine, boot-ahead, a trial's Allure
parameter, the evidence of the body); each phase has one wrapper here that calls them in the
order its docstring states, so no order hangs on registration. The one exception is Allure's
labelling (:mod:`chaos.plugin.allure`): it must wrap allure-pytest's own set-up wrapper, so it
is ``tryfirst`` there, while the set-up wrapper here is ``trylast`` (inside allure-pytest's).
``tests/plugin/test_hook_order.py`` holds the order.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import NoReturn

import pytest

from chaos.errors import ChaosError, CheckFailed, FaultNotObserved, HostTooBusy, WorkloadTimeout
from chaos.plugin.boot_ahead import BOOT_AHEAD
from chaos.plugin.engines import lost_engine_instead
from chaos.plugin.interrupts import INTERRUPTED
from chaos.plugin.items import evidence_dir, ran_raychaos
from chaos.plugin.keys import (
    EXPERIMENT_KEY,
    FACTORY_KEY,
    INCONCLUSIVE_KEY,
    NEXT_ITEM,
    PHASE_REPORTS,
)
from chaos.plugin.terminal import say
from chaos.plugin.trials import mark_trial
from chaos.steps import step


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Remember which test this process runs next (what boot-ahead boots for)."""
    item.stash[NEXT_ITEM] = nextitem
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Set-up, innermost (after allure-pytest opened the result, before any fixture):

    1. the trial as an excluded Allure parameter (:func:`chaos.plugin.trials.mark_trial`);
    2. the fixtures, what they raise re-raised as ``EngineLost`` when the engine is gone, and
       a boot on a host too busy to boot it as inconclusive (:func:`_too_busy_to_boot`).
    """
    mark_trial(item)
    with lost_engine_instead(item):
        try:
            return (yield)
        except HostTooBusy as exc:
            _too_busy_to_boot(item, exc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The test body, with these pieces in this order:

    1. boot the next test's cluster ahead (this test's clusters are up: its engine is known);
    2. the body, what it raises re-raised as ``EngineLost`` when its engine is gone (outside
       steps 3 and 4, which see the body's own error);
    3. when the body failed (not as its xfail marker expects), every node's log;
    3b. passed or not, the host's verdict (:func:`_inconclusive_instead`): a body judged while
       its nodes were stalled past :mod:`chaos.check.stalls`' threshold is inconclusive — a
       skip for pytest (a red run means Ray changed), broken in Allure with the stall named;
    4. passed or not, the evidence so far (history, timeline, measurements) as the body's last
       step. The fixture's teardown still writes the final history, heals and checks included;
    5. each node's container CPU at the body's end as Allure times it, before heals and
       postconditions (:mod:`chaos.plugin.results.timing`, for ``raychaos bench suite``).
    """
    _boot_next(item)
    with lost_engine_instead(item):
        try:
            try:
                outcome = yield
            except HostTooBusy as exc:  # a node added by the body could not boot
                _too_busy_to_boot(item, exc)
            except BaseException as exc:
                _inconclusive_instead(item, exc)
                if not INTERRUPTED.is_set() and not _expected(item, exc):
                    factory = item.stash.get(FACTORY_KEY, None)
                    if factory is not None:
                        factory.attach_logs("the test failed")
                raise
            _inconclusive_instead(item, None)
            return outcome
        finally:
            kit = item.stash.get(EXPERIMENT_KEY, None)
            if kit is not None and not INTERRUPTED.is_set():
                _attach_evidence(item)
            _cpu_at_body_end(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """Teardown: 1. the fixtures, what they raise re-raised as ``EngineLost`` when the engine
    is gone; 2. whatever: a cluster booted ahead for this test that it did not take goes."""
    try:
        with lost_engine_instead(item):
            return (yield)
    finally:
        BOOT_AHEAD.discard(item.nodeid)


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


@pytest.hookimpl
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Whatever is still booting ahead goes."""
    BOOT_AHEAD.discard()


def _boot_next(item: pytest.Item) -> None:
    """Boot the next test's cluster ahead, from a test that booted through the factory."""
    factory = item.stash.get(FACTORY_KEY, None)
    if factory is not None and factory.clusters:
        try:
            factory.boot_ahead(item.stash.get(NEXT_ITEM, None))
        except Exception as exc:  # noqa: BLE001 - an optimisation must never fail a test
            say(f"raychaos: could not boot the next test's cluster ahead: {exc}")


def _cpu_at_body_end(item: pytest.Item) -> None:
    """The clusters' node CPU at the body's end (the factory's own guard keeps it harmless)."""
    factory = item.stash.get(FACTORY_KEY, None)
    if factory is not None and factory.clusters:
        try:
            factory.cpu_point("body_end")
        except Exception as exc:  # noqa: BLE001 - a benchmark's input must never fail a test
            say(f"raychaos: could not read the clusters' CPU at the body's end: {exc}")


def _expected(item: pytest.Item, error: BaseException) -> bool:
    """Whether ``error`` is what the test's xfail marker expects (a recorded finding)."""
    mark = item.get_closest_marker("xfail")
    if mark is None or not all(bool(c) for c in mark.args):
        return False
    raises = mark.kwargs.get("raises")
    return raises is None or isinstance(error, raises)


def _judged(error: BaseException | None) -> bool:
    """Whether the body ended in a verdict on Ray that a stall can void: it passed, an
    assertion (a failure or a finding) or a workload's timeout. A harness error stays
    one, an unobserved fault is already inconclusive, pytest's own outcomes are the test's."""
    if error is None:
        return True
    if isinstance(error, FaultNotObserved | KeyboardInterrupt):
        return False
    if isinstance(error, pytest.skip.Exception | pytest.xfail.Exception | pytest.fail.Exception):
        return False
    return isinstance(error, AssertionError | WorkloadTimeout)


def _inconclusive_instead(item: pytest.Item, error: BaseException | None) -> None:
    """Raise a skip naming the stall when the body's verdict was judged on a host too busy to
    judge it (:meth:`chaos.experiment.Experiment.too_busy`); else return. Never raises
    anything else: measuring the host must not break the verdict it guards."""
    kit = item.stash.get(EXPERIMENT_KEY, None)
    if kit is None or INTERRUPTED.is_set() or not _judged(error) or INCONCLUSIVE_KEY in item.stash:
        return
    try:
        stall = kit.too_busy(failed=error is not None)
    except Exception as exc:  # noqa: BLE001 - a missing measurement leaves the verdict as is
        say(f"raychaos: could not measure the host's stalls for {item.nodeid}: {exc!r}")
        return
    if stall is None:
        return
    was = "passed" if error is None else f"{type(error).__name__}: {str(error).splitlines()[0]}"
    why = f"INCONCLUSIVE: the host was too busy to judge: {stall} (the body {was[:300]})"
    item.stash[INCONCLUSIVE_KEY] = str(stall)
    raise pytest.skip.Exception(why, _use_item_location=True) from error


def _too_busy_to_boot(item: pytest.Item, error: HostTooBusy) -> NoReturn:
    """A boot that timed out while its nodes were stalled past the threshold: a skip for
    pytest, broken in Allure with the stall named — inconclusive, like a stalled body."""
    item.stash[INCONCLUSIVE_KEY] = error.stall
    why = f"INCONCLUSIVE: the host was too busy to boot: {error.stall}"
    raise pytest.skip.Exception(why, _use_item_location=True) from error


def _attach_evidence(item: pytest.Item) -> None:
    """History JSON, timeline and measurements into reports/ and, as the last step of the
    test body, into Allure; never breaks the run."""
    kit = item.stash[EXPERIMENT_KEY]
    try:
        import json

        import allure

        from chaos.report.timeline import write_evidence

        with step("evidence: history, timeline and measurements"):
            history, picture = write_evidence(kit, evidence_dir(item.config), item.nodeid)
            allure.attach.file(
                str(history), name="history", attachment_type=allure.attachment_type.JSON
            )
            if picture is not None:
                allure.attach.file(
                    str(picture), name="timeline", attachment_type=allure.attachment_type.PNG
                )
            if kit.measurements:
                allure.attach(
                    json.dumps(kit.measurements, indent=1, default=repr),
                    name="measurements",
                    attachment_type=allure.attachment_type.JSON,
                )
    except Exception as exc:  # noqa: BLE001 - evidence is best effort, the verdict is not
        say(f"raychaos: could not write evidence for {item.nodeid}: {exc!r}")
