"""Which tests are raychaos tests: by name at collection (uses_raychaos), exactly once set up
(ran_raychaos: a value of this package among the test's fixture values)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

CONFTEST = """
import json
import pytest
from chaos.plugin.items import ran_raychaos, uses_raychaos


@pytest.fixture
def through_ours(nemesis):
    return nemesis


def pytest_collection_finish(session):
    found = {item.name: uses_raychaos(item) for item in session.items}
    (session.config.rootpath / "uses.json").write_text(json.dumps(found))


RAN = {}


def pytest_runtest_call(item):
    RAN[item.name] = ran_raychaos(item)


def pytest_sessionfinish(session):
    if RAN:
        (session.config.rootpath / "ran.json").write_text(json.dumps(RAN))
"""

SUITE = """
import pytest


def test_plain():
    pass


@pytest.mark.claim("TASK-01")
def test_claim():
    pass


@pytest.mark.cluster(workers=1)
def test_cluster_marker():
    pass


def test_ray_cluster(ray_cluster):
    pass


def test_settings(raychaos_settings):
    pass


def test_through_a_fixture_of_theirs(through_ours):
    pass


def test_cluster_spec_pulls_settings(cluster_spec):
    pass


class TestMarked:
    pytestmark = pytest.mark.claim("OBJ-01")

    def test_by_class(self):
        pass
"""

THEIRS = """
import pytest


@pytest.fixture
def docker_client():
    return "theirs"


@pytest.fixture
def experiment(docker_client):
    return "theirs"


def test_own_fixtures(experiment):
    pass
"""


def test_uses_raychaos(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE, test_theirs=THEIRS)
    run = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    assert run.ret == pytest.ExitCode.OK
    assert json.loads((pytester.path / "uses.json").read_text()) == {
        "test_plain": False,
        "test_claim": True,
        "test_cluster_marker": True,
        "test_ray_cluster[2.60.0]": True,
        "test_settings": True,
        "test_through_a_fixture_of_theirs[2.60.0]": True,
        "test_cluster_spec_pulls_settings[2.60.0]": True,
        "test_by_class": True,
        # Named like raychaos' own fixture: a collection-time guess (used for crash manifests).
        "test_own_fixtures": True,
    }
    # Run what needs no Docker: once set up, the fixture values tell exactly.
    run = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "-k", "not ray_cluster and not through"
    )
    run.assert_outcomes(passed=7)
    assert json.loads((pytester.path / "ran.json").read_text()) == {
        "test_plain": False,
        "test_claim": True,
        "test_cluster_marker": True,
        "test_settings": True,
        "test_cluster_spec_pulls_settings[2.60.0]": True,
        "test_by_class": True,
        # Fixtures named like raychaos' own, defined by the repository: not ours.
        "test_own_fixtures": False,
    }
