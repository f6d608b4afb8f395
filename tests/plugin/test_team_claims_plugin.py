"""A team's claims file in a pytest run: its ids accepted, checked and selected like ours, via
pytester (no Docker: the tests mark claims without booting)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

CLAIMS = """
[[family]]
id = "ACME"
feature = "Acme ingestion"
doc = "https://wiki.acme.example/ray/ingestion"
severity = "critical"

[[claim]]
id = "ACME-01"
family = "ACME"
fault = "a spot worker is preempted mid-batch"
outcome = "the ingestion job finishes with every record written once"
doc = "https://wiki.acme.example/ray/ingestion#spot"
source = "Acme runbook"

[[claim]]
id = "ACME-02"
family = "ACME"
fault = "the head restarts during a batch"
outcome = "the job resumes from its last checkpoint"
doc = "https://wiki.acme.example/ray/ingestion#head"
source = "Acme runbook"
"""

SUITE = """
import pytest


@pytest.mark.claim("ACME-01")
def test_spot():
    pass


@pytest.mark.claim("ACME-02")
def test_head():
    pass


@pytest.mark.claim("TASK-01")
def test_ours():
    pass
"""


@pytest.fixture
def team(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A repository with a claims file named in its ini (a relative path: from the rootdir)."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for var in ("RAYCHAOS_CLAIMS", "RAYCHAOS_CLAIMS_FILE"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", claims=CLAIMS)
    pytester.makeini("[pytest]\nraychaos_claims_file = claims.toml\n")
    return ["-p", "no:cacheprovider"]


def test_team_claims_are_accepted_and_selected_like_ours(
    pytester: pytest.Pytester, team: list[str]
) -> None:
    pytester.makepyfile(test_acme=SUITE)
    result = pytester.runpytest_subprocess(*team, "--raychaos-claims", "ACME-*", "-q")
    assert result.ret == pytest.ExitCode.OK, result.outlines
    result.stdout.fnmatch_lines(["2 passed, 1 deselected*"])


def test_a_team_claim_without_an_experiment_is_one_line_before_anything_runs(
    pytester: pytest.Pytester, team: list[str]
) -> None:
    pytester.makepyfile(test_acme=SUITE.replace('"ACME-02"', '"ACME-01"'))
    result = pytester.runpytest_subprocess(*team, str(pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines
    result.stderr.fnmatch_lines(["*team claim(s) ACME-02 (*claims.toml) have no experiment*"])
    # One file run on purpose verifies what it names: no check.
    assert pytester.runpytest_subprocess(*team, "test_acme.py").ret == pytest.ExitCode.OK


def test_a_clashing_or_malformed_file_stops_the_run_with_one_line(
    pytester: pytest.Pytester, team: list[str]
) -> None:
    pytester.makepyfile(test_acme=SUITE)
    pytester.makefile(".toml", claims=CLAIMS.replace("ACME", "TASK"))
    result = pytester.runpytest_subprocess(*team)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.outlines
    result.stderr.fnmatch_lines(
        ["*--raychaos-claims-file (from ini raychaos_claims_file):*family TASK is one of*"]
    )
    missing = pytester.runpytest_subprocess(*team, "--raychaos-claims-file", "nope.toml")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*cannot read the claim catalogue*nope.toml*"])
