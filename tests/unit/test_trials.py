"""The trial option and the names of trials (chaos.plugin.settings, chaos.report.trials), without pytest runs."""

from __future__ import annotations

import pytest

from chaos.plugin.settings import SettingError, resolve
from chaos.report.trials import trial_ids, trial_of_parameters, untrial


def test_one_trial_by_default_and_precedence() -> None:
    assert resolve({}, {}, env={}).trials == 1
    settings = resolve({"trials": "4"}, {"raychaos_trials": "2"}, env={"RAYCHAOS_TRIALS": "3"})
    assert (settings.trials, settings.sources["trials"]) == (4, "--raychaos-trials")
    assert resolve({}, {"raychaos_trials": "2"}, env={"RAYCHAOS_TRIALS": "3"}).trials == 3
    assert resolve({}, {"raychaos_trials": "2"}, env={}).trials == 2


@pytest.mark.parametrize("raw", ["0", "-2", "1.0", "two", "²", " ", "1e3"])
def test_anything_but_a_whole_number_of_at_least_one_is_refused(raw: str) -> None:
    with pytest.raises(SettingError) as info:
        resolve({"trials": raw}, {}, env={})
    assert str(info.value) == (
        f"--raychaos-trials (from --raychaos-trials): expected a whole number of trials ≥ 1, "
        f"got {raw.strip()!r}"
    )


def test_trial_ids() -> None:
    assert trial_ids(3) == ["trial1", "trial2", "trial3"]


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("test_x[2.60.0-trial2]", "test_x[2.60.0]"),
        ("test_x[2.60.0-trial12]", "test_x[2.60.0]"),
        ("test_x[trial3-2.60.0]", "test_x[2.60.0]"),
        ("test_x[a-trial1-2.60.0]", "test_x[a-2.60.0]"),
        ("test_x[trial1]", "test_x"),
        ("test_x[2.60.0]", "test_x[2.60.0]"),
        ("test_trial1_kills[2.60.0]", "test_trial1_kills[2.60.0]"),
        ("test_x[mytrial2-2.60.0]", "test_x[mytrial2-2.60.0]"),
    ],
)
def test_untrial_drops_only_the_trial_id(name: str, plain: str) -> None:
    assert untrial(name) == plain


def test_trial_of_allure_parameters() -> None:
    assert trial_of_parameters([{"name": "raychaos_trial", "value": "2", "excluded": True}]) == 2
    assert trial_of_parameters([{"name": "raychaos.ray_version", "value": "'2.60.0'"}]) is None


def test_option_help_is_safe_for_argparse() -> None:
    """argparse %-formats help strings: a bare % broke `pytest --help`."""
    from chaos.plugin.settings import OPTIONS

    for option in OPTIONS:
        assert "%" not in option.help.replace("%%", ""), option.flag
