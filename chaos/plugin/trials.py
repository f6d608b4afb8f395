"""Repeated trials (``--raychaos-trials N``): every experiment runs N times.

Like the Ray release, the trial is a parameter of the test (pytest-repeat's shape: a fixture
added to the test's closure and parametrised indirectly), so its id says which trial it is:
``test_x[2.60.0-trial2]``. With N = 1 nothing is parametrised and ids stay ``test_x[2.60.0]``.

Allure identity, the choice made here: the trial is an *excluded* Allure parameter, so the
N trials of one test on one release share its ``historyId`` (and, as every parametrisation
does, its ``testCaseId``). Allure then shows trials 1…N−1 under the last one's *Retries*
tab and marks the test *flaky* when their statuses differ, and the test keeps one history
across nights however many trials each night ran (a per-trial history would compare
"trial 2" of one night with "trial 2" of another, which means nothing). The release stays a
non-excluded parameter, so releases keep separate histories. ``raychaos report`` and
``raychaos compare`` read every result of one historyId as one test's trials
(:mod:`chaos.report.stats`), never only the last.

allure-pytest adds the test's pytest parameters at the end of set-up, skipping names already
present; the excluded parameter is added first (:func:`mark_trial`, from the innermost set-up
wrapper in :mod:`chaos.plugin.hooks`: after allure-pytest opened the result, before any
fixture), so a trial whose cluster never booted still joins the history. The names the report
reads back are in :mod:`chaos.report.trials`.
"""

from __future__ import annotations

import pytest

from chaos.plugin.terminal import say
from chaos.report.trials import TRIAL, trial_ids


def parametrize(metafunc: pytest.Metafunc, count: int) -> None:
    """Run the test ``count`` times, the trial in its id (nothing happens for 1)."""
    if count <= 1:
        return
    if TRIAL not in metafunc.fixturenames:
        metafunc.fixturenames.append(TRIAL)
    metafunc.parametrize(TRIAL, range(1, count + 1), indirect=True, ids=trial_ids(count))


def trial_number(item: pytest.Item) -> int | None:
    """The trial ``item`` is (None: the run has one trial per test)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    value = params.get(TRIAL)
    return int(value) if isinstance(value, int) else None


@pytest.fixture
def raychaos_trial(request: pytest.FixtureRequest) -> int:
    """Which of the ``--raychaos-trials`` runs of this test this is (1 when there is one)."""
    return int(getattr(request, "param", 1))


def mark_trial(item: pytest.Item) -> None:
    """The trial as an excluded Allure parameter, before any fixture (see the module doc)."""
    number = trial_number(item)
    if number is not None and item.config.getoption("allure_report_dir", None):
        try:
            import allure

            allure.dynamic.parameter(TRIAL, number, excluded=True)
        except Exception as exc:  # noqa: BLE001 - reporting never breaks a run
            say(f"raychaos: could not mark the trial of {item.nodeid} in Allure: {exc!r}")
