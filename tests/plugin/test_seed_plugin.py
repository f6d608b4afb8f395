"""The run's schedule seed as users meet it: one per run, printed, replayed, one error line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chaos.spec.schedule import Schedule

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
import pytest
from pathlib import Path
from chaos.spec.schedule import Schedule


@pytest.mark.parametrize("n", range(4))
def test_schedule(raychaos_seed, n):
    schedule = Schedule.build(raychaos_seed, kinds=["kill_node"], duration_s=60, interval_s=10)
    out = Path(__file__).parent / f"seen-{n}.txt"
    out.write_text(f"{raychaos_seed} {[s.at_s for s in schedule.strikes]}")
"""


def _seen(pytester: pytest.Pytester) -> set[str]:
    return {Path(pytester.path, f"seen-{n}.txt").read_text() for n in range(4)}


def test_one_seed_for_every_xdist_worker_printed_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    seen = _seen(pytester)
    assert len(seen) == 1, f"the workers disagree on the seed: {seen}"
    seed = int(next(iter(seen)).split()[0])
    said = [line for line in result.errlines + result.outlines if "schedule seed" in line]
    assert said == [f"raychaos: schedule seed {seed} (replay it with --raychaos-seed {seed})"], said


def test_the_given_seed_replays_the_same_schedule(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=4)
    (first,) = _seen(pytester)
    seed = first.split()[0]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--raychaos-seed={seed}")
    result.assert_outcomes(passed=4)
    assert _seen(pytester) == {first}
    expected = Schedule.build(int(seed), kinds=["kill_node"], duration_s=60, interval_s=10)
    assert first == f"{seed} {[s.at_s for s in expected.strikes]}"


def test_two_runs_draw_two_seeds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    seeds = set()
    for _ in range(2):
        pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=4)
        seeds |= {s.split()[0] for s in _seen(pytester)}
    assert len(seeds) == 2, f"two runs drew the same seed (one in 2**31): {seeds}"


def test_the_seed_from_env_and_a_bad_one_is_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(SUITE)
    monkeypatch.setenv("RAYCHAOS_SEED", "1234")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=4)
    assert {s.split()[0] for s in _seen(pytester)} == {"1234"}
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--raychaos-seed=tuesday")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert errors == [
        "ERROR: --raychaos-seed (from --raychaos-seed): expected a whole number ≥ 0 (the seed "
        "a run printed and recorded), got 'tuesday'"
    ], errors


def test_a_suite_without_the_seed_hears_nothing_of_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not re.search(
        "schedule seed|raychaos-seed", "\n".join(result.outlines + result.errlines)
    )


def test_a_deselected_user_of_the_seed_prints_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "nothing_matches")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "schedule seed" not in "\n".join(result.outlines + result.errlines)
