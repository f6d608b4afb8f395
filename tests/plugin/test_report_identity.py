"""A crash result names the test as allure-pytest does (chaos.plugin.results.identity, no allure internals).

Real tests run through allure-pytest; a conftest records, at collection, what raychaos would
write for each of them should its worker die. Every field must equal allure-pytest's own
result, or Allure would show a crashed test as a second test beside its history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos.plugin.results import identity

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

CONFTEST = """
import json
import pytest
from chaos.plugin.keys import SETTINGS_KEY
from chaos.plugin.results import identity
from chaos.plugin.results.crash import item_facts
from chaos.plugin.items import engine_of, uses_raychaos


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a tag")


def pytest_collection_finish(session):
    version = session.config.stash[SETTINGS_KEY].ray_version
    facts = {}
    for item in session.items:
        name = identity.full_name(item)
        facts[item.name] = {
            "raychaos": uses_raychaos(item),
            "facts": item_facts(item, version, engine_of(item)) if uses_raychaos(item) else None,
            "fullName": name,
            "historyId": identity.history_id(name, identity.params_of(item)),
            "testCaseId": identity.case_id(name),
            "titlePath": identity.title_path(item),
        }
    (session.config.rootpath / "facts.json").write_text(json.dumps(facts))
"""

FLAT = '''
import allure
import pytest


@pytest.fixture(params=["a", 3])
def flavour(request):
    return request.param


@pytest.fixture
def broken():
    raise RuntimeError("the cluster did not boot")


@pytest.mark.claim("TASK-01", "NET-01", "NODE-02")
@pytest.mark.parametrize(
    "value, other",
    [(1, "x"), (None, (1, 2)), ("привет", b"raw"), pytest.param("a/b::c", 2.5, id="odd")],
)
def test_values(value, other, flavour):
    """Parametrised directly and through a fixture."""


@allure.feature("Team feature")
@allure.suite("Team suite")
@allure.severity(allure.severity_level.MINOR)
@allure.link("https://example.com/x", name="x")
@allure.issue("https://example.com/issue/1", name="issue 1")
@allure.description("told by a decorator")
@allure.tag("team-tag")
@pytest.mark.slow
@pytest.mark.claim("GCS-01")
def test_decorated():
    pass


@pytest.mark.claim("ACTOR-01")
def test_setup_breaks(broken):
    """Set-up fails: the claims are labelled all the same."""


@pytest.mark.cluster(workers=1)
def test_cluster_marker_only():
    pass


def test_not_ours():
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_not_ours_parametrised(n):
    pass


@pytest.mark.claim("OBJ-01")
class TestClass:
    def test_in_class(self):
        """In a class, claim on the class."""

    class TestNested:
        @pytest.mark.parametrize("k", [0])
        def test_nested(self, k):
            pass
'''

DEEP = """
import pytest


@pytest.mark.claim("SCHED-01")
def test_deep():
    pass


class TestDeepNotOurs:
    def test_deep_not_ours(self):
        pass
"""


def _present(value: Any) -> Any:
    """allure-commons drops empty fields from the JSON it writes."""
    return value if value or value is False else None


def _by_name(alluredir: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        # A raychaos test's title is its name with its claim ids in front.
        name = re.sub(r"^\[[A-Z0-9, -]+\] ", "", data["name"])
        assert name not in found, data["name"]
        found[name] = data
    return found


def test_crash_facts_equal_what_allure_pytest_writes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_flat=FLAT)
    deep = pytester.mkpydir("pkg")
    (deep / "sub").mkdir()
    (deep / "sub" / "__init__.py").write_text("")
    (deep / "sub" / "test_deep.py").write_text(DEEP)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(f"--alluredir={alluredir}", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=17, errors=1)
    facts: dict[str, dict[str, Any]] = json.loads((pytester.path / "facts.json").read_text())
    results = _by_name(alluredir)
    assert set(results) == set(facts)
    assert {n for n, f in facts.items() if not f["raychaos"]} == {
        "test_not_ours",
        "test_not_ours_parametrised[1]",
        "test_not_ours_parametrised[2]",
        "test_deep_not_ours",
    }
    history_ids = set()
    for name, result in results.items():
        mine = facts[name]
        for key in ("fullName", "historyId", "testCaseId", "titlePath"):
            assert result[key] == mine[key], (name, key)
        history_ids.add(result["historyId"])
        if not mine["raychaos"]:
            assert "raychaos.ray_version" not in json.dumps(result.get("parameters", [])), name
            continue
        expected = mine["facts"]
        assert result["name"] == expected["name"], name
        labels = [x for x in result["labels"] if x["name"] not in ("host", "thread")]
        assert sorted(labels, key=str) == sorted(expected["labels"], key=str), name
        for key in (
            "fullName",
            "historyId",
            "testCaseId",
            "titlePath",
            "links",
            "parameters",
            "description",
            "descriptionHtml",
        ):
            assert _present(result.get(key)) == _present(expected[key]), (name, key)
    # Every parametrisation is its own history; a sanity check that the ids are not constant.
    assert len(history_ids) == len(results)
    decorated = results["test_decorated"]
    assert {"name": "suite", "value": "Team suite"} in decorated["labels"]
    assert not any(x["name"] == "parentSuite" for x in decorated["labels"])
    assert results["test_values[a-odd]"]["fullName"] == "test_flat#test_values"
    assert results["test_deep"]["fullName"] == "pkg.sub.test_deep#test_deep"
    assert results["test_nested[0]"]["fullName"] == "test_flat.TestClass.TestNested#test_nested"
    broken = results["test_setup_breaks"]
    assert broken["status"] == "broken"
    assert [x["value"] for x in broken["labels"] if x["name"] == "claim"] == ["ACTOR-01"]


@pytest.mark.parametrize(
    "value", ["s", "привет", b"raw", bytearray(b"x"), 1, 2.5, None, (1, "a"), ["x"], {"k": 1}]
)
def test_md5_and_represent_match_allure_commons(value: object) -> None:
    from allure_commons import utils  # only to compare: raychaos does not import it

    # Typed aliases: allure-commons ships these unannotated.
    md5: Callable[..., str] = utils.md5
    represent: Callable[[object], str] = utils.represent
    platform_label: Callable[[], str] = utils.platform_label
    assert identity.md5("pkg#test", value) == md5("pkg#test", value)
    assert identity.represent(value) == represent(value)
    assert identity.platform_label() == platform_label()
