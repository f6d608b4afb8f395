"""The claim catalogue (fixtures/claims.toml): complete, valid, and what `raychaos claims` shows."""

from __future__ import annotations

import ast
import json
import tomllib
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.errors import ChaosError
from chaos.report.catalogue import FILE, Catalogue, load_catalogue, parse_catalogue
from chaos.resources import fixtures_path

ROOT = Path(__file__).resolve().parents[2]

FAMILY = """
[[family]]
id = "TASK"
feature = "Tasks"
doc = "https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html"
severity = "normal"
"""
OBJ = FAMILY.replace('"TASK"', '"OBJ"').replace('"Tasks"', '"Objects"')
ENTRY = """
[[claim]]
id = "TASK-01"
family = "TASK"
fault = "a fault"
outcome = "an outcome"
doc = "https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html"
source = "Ray docs: ray-core/fault_tolerance/tasks"
"""


def raychaos(*argv: str) -> int:
    """The claim commands as `raychaos` runs them (a ChaosError is a one-line usage error)."""
    return main(list(argv))


def marker_ids() -> dict[str, set[str]]:
    """Claim ids of every @pytest.mark.claim(...) in the standard suite, by file."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "experiments").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "claim"
            ):
                ids = {a.value for a in node.args if isinstance(a, ast.Constant)}
                found.setdefault(path.name, set()).update(str(i) for i in ids)
    return found


def test_the_shipped_catalogue_has_every_claim_once_with_every_field() -> None:
    catalogue = load_catalogue()
    assert len(set(catalogue.ids)) == len(catalogue) > 0
    assert catalogue.ids[:2] == ("TASK-01", "TASK-02")
    assert catalogue.ids[-2:] == ("INV-01", "INV-02")
    for claim in catalogue:
        assert claim.family == claim.id.split("-")[0] and claim.family in catalogue.families
        assert claim.fault and claim.outcome and claim.source, claim.id
        assert claim.feature == catalogue.families[claim.family].feature, claim.id
        assert claim.doc.startswith("https://docs.ray.io/"), claim.id
        assert claim.source.startswith(("Ray docs: ", "Ray source: ", "raychaos postcondition"))
    # Every family has claims, and every claim is the subject of some experiment (the counts
    # come from the catalogue, never written down twice).
    assert {c.family for c in catalogue} == set(catalogue.families)
    # (INV-* are postconditions every experiment checks, carried by no marker.)
    marked = set().union(*marker_ids().values())
    judged = {c.id for c in catalogue if c.family != "INV"}
    assert marked == judged, sorted(marked ^ judged)
    assert load_catalogue() is catalogue  # read once per process


def test_version_scope_is_data() -> None:
    catalogue = load_catalogue()
    rocksdb = catalogue.get("GCS-06")
    assert rocksdb.since == "2.57.0"
    assert rocksdb.scope_text.startswith("since 2.57.0; ")
    assert "2.54.0" in catalogue.get("OBJ-02").scope and catalogue.get("OBJ-02").since == ""
    assert catalogue.get("TASK-01").scope_text == "all releases"
    assert catalogue.get("VER-01").source == (
        "Ray source: python/ray/_private/utils.py:check_version_info"
    )


def test_every_marker_of_the_suite_names_a_catalogued_claim() -> None:
    catalogue = load_catalogue()
    found = marker_ids()
    assert len(found) >= 10, found  # the suite's files were read
    strays = {f: sorted(ids - set(catalogue.ids)) for f, ids in found.items()}
    assert {f: s for f, s in strays.items() if s} == {}
    # Everything but the postconditions is claimed by some experiment.
    claimed = set().union(*found.values())
    assert set(catalogue.ids) - claimed == {"INV-01", "INV-02"}


def test_the_catalogue_is_written_in_the_projects_words() -> None:
    text = fixtures_path(FILE).read_text(encoding="utf-8")
    assert "CLAIMS.md" not in text and "shared/" not in text
    assert not fixtures_path("claims.txt").exists()


def test_the_wheel_ships_the_catalogue() -> None:
    """setuptools' package-data must carry claims.toml into chaos/fixtures."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["chaos.fixtures"]
    assert any(Path(FILE).match(pattern) for pattern in data), data


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "expected [[family]] tables"),
        (FAMILY, "expected [[claim]] tables"),
        ("[[claim]\n", "not valid TOML"),
        (FAMILY + ENTRY + ENTRY, "listed twice: TASK-01"),
        (
            FAMILY + OBJ + ENTRY.replace('family = "TASK"', 'family = "OBJ"'),
            "prefix is not its family 'OBJ'",
        ),
        (FAMILY + ENTRY.replace('"TASK-01"', '"TASK-1"'), "is not FAMILY-NN"),
        (
            FAMILY + ENTRY.replace('"TASK-01"', '"XYZ-01"').replace('"TASK"', '"XYZ"'),
            "family 'XYZ'",
        ),
        (FAMILY + ENTRY + 'since = "2.59"\n', "since '2.59' is not a release"),
        (FAMILY + ENTRY + 'sinse = "2.59.0"\n', "unknown field(s) sinse"),
        (FAMILY + ENTRY.replace('fault = "a fault"', 'fault = ""'), "fault is required"),
        (FAMILY + ENTRY.replace('fault = "a fault"', "fault = 3"), "fault must be a string"),
        (FAMILY + ENTRY.replace("https://", "http://"), "is not an https:// link"),
        ("claims = 1\n" + FAMILY + ENTRY, "unexpected top-level key(s) claims"),
        (FAMILY + OBJ + ENTRY, "family without claims: OBJ"),
        (FAMILY + FAMILY + ENTRY, "family TASK listed twice"),
        (FAMILY.replace('"normal"', '"grave"') + ENTRY, "severity 'grave' is not one of"),
        (FAMILY.replace('severity = "normal"\n', "") + ENTRY, "missing: severity"),
    ],
)
def test_a_bad_catalogue_is_refused_naming_the_entry(text: str, error: str) -> None:
    with pytest.raises(ChaosError) as caught:
        parse_catalogue(text, "test.toml")
    assert error in str(caught.value)


def test_an_unreadable_catalogue_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"cannot read the claim catalogue .* reinstall raychaos"):
        load_catalogue(tmp_path / "absent.toml")


def test_patterns_select_in_catalogue_order_and_unknown_ones_name_neighbours() -> None:
    catalogue = load_catalogue()
    assert catalogue.select(["TASK-01", "obj-0[12]", "INV-*"]) == [
        "TASK-01",
        "OBJ-01",
        "OBJ-02",
        "INV-01",
        "INV-02",
    ]
    assert catalogue.select([]) == []
    with pytest.raises(ChaosError) as caught:
        catalogue.select(["TASK-*", "TASK-10", "FOO-*"])
    message = str(caught.value)
    assert "pattern 'TASK-10' matches no claim (nearest: TASK-01, TASK-02, TASK-03)" in message
    assert "pattern 'FOO-*' matches no claim (families: TASK, OBJ," in message
    assert "`raychaos claims` lists every claim id" in message
    assert catalogue.nearest("GSC-01")[0] == "GCS-01"
    assert "TASK-10" not in catalogue and "TASK-01" in catalogue
    with pytest.raises(KeyError, match="nearest: TASK-01"):
        catalogue.get("TASK-10")


def test_a_small_catalogue_round_trips_to_json() -> None:
    catalogue = parse_catalogue(FAMILY + ENTRY + 'scope = "a note"\n')
    assert isinstance(catalogue, Catalogue) and catalogue.ids == ("TASK-01",)
    assert catalogue.claims[0].to_json() == {
        "id": "TASK-01",
        "family": "TASK",
        "feature": "Tasks",
        "fault": "a fault",
        "outcome": "an outcome",
        "doc": "https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html",
        "source": "Ray docs: ray-core/fault_tolerance/tasks",
        "since": "",
        "scope": "a note",
    }


def test_raychaos_claims_lists_id_family_fault_and_scope(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert raychaos("claims") == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["TASK-01", "Tasks"]
    assert "the worker process executing a task is killed with SIGKILL" in lines[0]
    gcs06 = next(n for n, line in enumerate(lines) if line.startswith("GCS-06"))
    assert lines[gcs06 + 1].strip().startswith("scope: since 2.57.0; ")
    total = len(load_catalogue())
    assert sum(1 for line in lines if not line.startswith(" ")) == total
    assert err.strip() == f"{total} of {total} claims"


def test_raychaos_claims_json_and_patterns(capsys: pytest.CaptureFixture[str]) -> None:
    assert raychaos("claims", "--json", "OBJ-0[1-2],VER-*") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ["OBJ-01", "OBJ-02", "VER-01", "VER-02", "VER-03"]
    assert rows[0]["family"] == "OBJ" and rows[0]["feature"] == "Objects"
    assert set(rows[0]) == {
        "id", "family", "feature", "fault", "outcome", "doc", "source", "since", "scope",
    }  # fmt: skip
    assert raychaos("claims", "NOPE-*") == 2
    assert "raychaos: error: pattern 'NOPE-*' matches no claim" in capsys.readouterr().err
