"""Several engines as users meet them through the plugin (pytester; no Docker).

The header says which worker boots where; every raychaos result carries an ``engine`` label;
a test whose engine stops answering ends with one ``EngineLost`` line (broken, never xfailed)
and its teardown leaves the engine alone; a test whose engine still answers keeps its own
outcome. The engines here are fakes: a conftest overrides the ``raychaos_engines`` fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

A, B, C = "unix:///nonexistent/a.sock", "unix:///nonexistent/b.sock", "unix:///nonexistent/c.sock"


def test_the_header_says_which_workers_boot_on_which_engine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(raychaos_settings): pass")
    hosts = ["--raychaos-docker-host", A, "--raychaos-docker-host", B]
    result = pytester.runpytest_subprocess("-n", "3", *hosts, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [f"raychaos: engines (--raychaos-docker-host): {A} ← gw0, gw2; {B} ← gw1"]
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", *hosts, "--raychaos-docker-host", C, "-p", "no:cacheprovider"
    )
    result.stdout.fnmatch_lines(
        [f"raychaos: WARNING: 1 engine(s) get no experiments ({C}): run with -n 3 or more"]
    )
    result.assert_outcomes(passed=1)


def test_every_result_names_the_engine_of_its_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import os
        import pytest

        @pytest.mark.parametrize("i", range(2))
        def test_ok(raychaos_settings, i, pytestconfig):
            worker = os.environ["PYTEST_XDIST_WORKER"]
            (pytestconfig.rootpath / f"test_ok[{i}].worker").write_text(worker)
        """
    )
    alluredir = pytester.path / "allure"
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        f"--alluredir={alluredir}",
        "--raychaos-docker-host",
        A,
        "--raychaos-docker-host",
        B,
    )
    result.assert_outcomes(passed=2)
    seen = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        worker = (pytester.path / f"{data['name']}.worker").read_text()
        engine = [x["value"] for x in data["labels"] if x["name"] == "engine"]
        assert engine == [{"gw0": A, "gw1": B}[worker]], (data["name"], worker, engine)
        seen[data["name"]] = engine[0]
    assert set(seen.values()) == {A, B}, seen


FAKE_ENGINES = """
import pytest
from chaos.backends.docker.client import EngineLost


class Engine:
    def __init__(self, url, answers):
        self.url = url
        self.id = "fake-id"
        self.cpus = 2
        self.lost = ""
        self.answers = answers
        self.client = object()
        self.builder = object()

    @property
    def name(self):
        return self.url

    def check(self):
        if self.lost or not self.answers:
            self.lost = "Connection refused"
        return self.lost or None

    def lost_error(self, during=""):
        return EngineLost(f"engine {self.url} stopped answering: {self.lost}; the test was at: {during}")


class Pool:
    def __init__(self, engine):
        self.engine = engine

    def pick(self):
        return self.engine


@pytest.fixture(scope="session")
def raychaos_engines(request):
    return Pool(Engine("unix:///nonexistent/b.sock", answers=request.config.getoption("answers")))


def pytest_addoption(parser):
    parser.addoption("--answers", action="store_true")
"""

TESTS = """
import pytest
from chaos.errors import DockerUnavailable


def test_engine_dies(ray_cluster_factory):
    raise DockerUnavailable("exec true in head failed: lost the Docker daemon (refused)")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="FINDING: a recorded finding")
def test_finding_on_a_dead_engine(ray_cluster_factory):
    raise AssertionError("the outcome the finding expects")


def test_plain_failure(ray_cluster_factory):
    assert 1 == 2, "Ray contradicts its docs"
"""


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[data["name"]] = data
    return found


def test_a_test_on_a_lost_engine_ends_with_one_engine_lost_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(FAKE_ENGINES)
    pytester.makepyfile(test_lost=TESTS)
    alluredir = pytester.path / "allure"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--alluredir={alluredir}")
    # Three failures, no xfail: a dead engine proves nothing, least of all a finding.
    result.assert_outcomes(failed=3)
    lines = [line for line in result.outlines if line.startswith("FAILED")]
    assert len(lines) == 3, result.outlines
    assert all(" - EngineLost: engine" in line for line in lines), lines
    result.stdout.fnmatch_lines(
        [
            "*EngineLost: engine unix:///nonexistent/b.sock stopped answering: Connection refused; "
            "the test was at: DockerUnavailable: exec true in head failed*"
        ]
    )
    assert "ERROR at teardown" not in result.stdout.str()
    results = _results(alluredir)
    assert {r["status"] for r in results.values()} == {"broken"}
    finding = results["test_finding_on_a_dead_engine"]["statusDetails"]["message"]
    assert finding.startswith("chaos.backends.docker.client.EngineLost: engine"), finding
    assert "XFAIL" not in finding
    for result_ in results.values():
        assert {"name": "engine", "value": B} in result_["labels"]


def test_a_test_whose_engine_answers_keeps_its_own_outcome(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAKE_ENGINES)
    pytester.makepyfile(test_lost=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--answers")
    result.assert_outcomes(failed=2, xfailed=1)
    assert "EngineLost" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*DockerUnavailable: exec true in head failed*"])
