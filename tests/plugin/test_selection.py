"""Selecting experiments by claim (--raychaos-claims) and checking marker ids, via pytester."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
import pytest


@pytest.mark.claim("TASK-01")
def test_task(raychaos_ray_version):
    pass


@pytest.mark.claim("OBJ-02", "OBJ-03")
def test_objects():
    pass


@pytest.mark.parametrize("backend", ["redis", pytest.param("rocksdb", marks=pytest.mark.claim("GCS-06"))])
def test_backend(backend):
    pass


@pytest.mark.claim("NODE-01")
class TestNodes:
    def test_kill(self):
        pass


def test_plain():
    pass


def test_postconditions(experiment):
    pass
"""


@pytest.fixture
def selection(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments of a run whose selection hooks chaos.plugin registers (no Docker, no claims)."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("RAYCHAOS_CLAIMS", raising=False)
    assert pytester.parseconfigure().pluginmanager.has_plugin("chaos.plugin.selection")
    return ["-p", "no:cacheprovider"]


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


def test_claims_select_by_id_and_pattern_and_deselect_the_rest(
    pytester: pytest.Pytester, selection: list[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        *selection,
        "--collect-only",
        "-q",
        "--raychaos-claims",
        "obj-*, TASK-01",
        "--raychaos-ray-version",
        "2.59.0",
        "--raychaos-ray-version",
        "2.60.0",
    )
    assert result.ret == pytest.ExitCode.OK, result.outlines
    assert collected(result) == [
        "test_suite.py::test_task[2.59.0]",
        "test_suite.py::test_task[2.60.0]",
        "test_suite.py::test_objects",
    ]
    result.stdout.fnmatch_lines(["3/9 tests collected (6 deselected)*"])


def test_a_parametrised_claim_a_class_claim_and_the_postconditions(
    pytester: pytest.Pytester, selection: list[str]
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        *selection, "--collect-only", "-q", "--raychaos-claims", "GCS-06,NODE-*,INV-01"
    )
    assert result.ret == pytest.ExitCode.OK, result.outlines
    assert collected(result) == [
        "test_suite.py::test_backend[rocksdb]",
        "test_suite.py::TestNodes::test_kill",
        "test_suite.py::test_postconditions[2.60.0]",
    ]


def test_the_postconditions_belong_to_raychaos_experiment_fixture_only(
    pytester: pytest.Pytester, selection: list[str]
) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def experiment():
            return "the repository's own"
        """
    )
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        *selection, "--collect-only", "-q", "--raychaos-claims", "INV-*"
    )
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.outlines
    assert collected(result) == []


def test_claims_run_the_selected_tests_only(
    pytester: pytest.Pytester, selection: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYCHAOS_CLAIMS", "OBJ-0[23]")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(*selection)
    result.assert_outcomes(passed=1, deselected=6)


def test_an_unknown_marker_id_is_a_usage_error_naming_test_id_and_neighbours(
    pytester: pytest.Pytester, selection: list[str]
) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.claim("TASK-01", "TASK-10")
        def test_typo():
            pass

        @pytest.mark.claim("OBJ-02")
        def test_fine():
            pass
        """
    )
    result = pytester.runpytest_subprocess(*selection)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: raychaos: unknown claim id in @pytest.mark.claim*",
            "  test_bad.py::test_typo: claim id 'TASK-10' is not in the claim catalogue "
            "(nearest: TASK-01, TASK-02, TASK-03)",
        ]
    )
    assert "test_fine" not in result.stderr.str()
    result.stdout.no_fnmatch_line("*passed*")


def test_a_pattern_matching_no_claim_is_a_usage_error_naming_its_source(
    pytester: pytest.Pytester, selection: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYCHAOS_CLAIMS", "TASK-01,OBJ-9*")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(*selection)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --raychaos-claims (from env RAYCHAOS_CLAIMS): pattern 'OBJ-9*' matches no "
            "claim (nearest: OBJ-01, *"
        ]
    )


def test_inert_without_the_option(pytester: pytest.Pytester, selection: list[str]) -> None:
    """Valid markers and plain tests: everything runs, nothing is deselected."""
    pytester.makepyfile(
        test_plain="""
        import pytest

        def test_plain():
            pass

        @pytest.mark.claim("NET-01")
        def test_claimed():
            pass
        """
    )
    result = pytester.runpytest_subprocess(*selection)
    result.assert_outcomes(passed=2)
    assert "deselected" not in result.stdout.str()
