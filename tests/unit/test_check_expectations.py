"""Version-scoped expectations: every one has evidence, and its boundaries behave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version

import chaos.check
from chaos.check import (
    EXPECTATIONS,
    LINEAGE_EVICTED,
    MAX_ATTEMPTS_EXCEEDED,
    RETRIES_DISABLED,
    Expectation,
    NotChecked,
    absent_reason,
    applies,
    expectation,
    expected,
    lost_object_error,
)
from chaos.check.expectations import READ
from chaos.errors import ChaosError
from chaos.spec import releases

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
NAMES = [e.name for e in EXPECTATIONS]


def key(version: str) -> Version:
    return releases.release_key(version)


def test_names_are_unique() -> None:
    assert len(NAMES) == len(set(NAMES))


@pytest.mark.parametrize("e", EXPECTATIONS, ids=NAMES)
def test_every_expectation_has_evidence_naming_a_file_and_a_read_release(e: Expectation) -> None:
    assert e.then and e.evidence
    # A file of Ray's (python/ray/…, ray/…, src/ray/…) and a release it was read in.
    assert re.search(r"\bray/\S+", e.evidence), e.evidence
    assert any(v in e.evidence for v in e.read), e.evidence
    assert e.since in e.read, "the first release must itself have been read"
    known = releases.shipped()
    assert set(e.read) <= set(known), set(e.read) - set(known)


@pytest.mark.parametrize("e", EXPECTATIONS, ids=NAMES)
def test_an_unpinned_first_release_says_so_and_is_bounded(e: Expectation) -> None:
    if e.pinned:
        # The release right before ``since`` was read and shows ``before``.
        assert e.before, "a pinned boundary has an older behaviour"
        assert e.last_before is not None and e.last_before in e.read
        return
    if e.last_before is None:
        # Every release read has it: older ones are not checked, and the evidence says so.
        assert e.since == e.floor and not e.before
        assert f"before {e.floor} not checked" in e.evidence, e.evidence
    else:
        # A gap of unread releases between the last read without it and the first with it.
        assert e.before
        assert "not read" in e.evidence, e.evidence


@pytest.mark.parametrize("e", EXPECTATIONS, ids=NAMES)
def test_boundaries(e: Expectation) -> None:
    assert applies(e.name, e.since) is True
    assert expected(e.name, e.since) == e.then
    # Every release read from ``since`` on, and every newer one known, has ``then``.
    newer = [v for v in releases.shipped() if key(v) >= key(e.since)]
    assert all(expected(e.name, v) == e.then for v in newer)
    if e.last_before is not None:
        assert applies(e.name, e.last_before) is False
        assert expected(e.name, e.last_before) == e.before
        assert expected(e.name, e.floor) == e.before
    older = [v for v in releases.shipped() if key(v) < key(e.floor)]
    with pytest.raises(NotChecked, match=re.escape(e.floor)):
        expected(e.name, older[-1])


def test_not_checked_is_a_harness_error_not_an_assertion() -> None:
    assert issubclass(NotChecked, ChaosError)
    assert not issubclass(NotChecked, AssertionError)
    with pytest.raises(NotChecked) as info:
        applies("actor_died_error", "2.49.2")
    assert info.value.hint and "expectations.py" in info.value.hint


def test_a_release_in_an_unread_gap_is_not_guessed() -> None:
    e = expectation("node_died_message")
    assert (e.last_before, e.since, e.pinned) == ("2.51.0", "2.52.0", False)
    assert expected(e.name, "2.51.0") == "The node IP: {ip}"
    for gap in ("2.51.1", "2.51.2"):
        with pytest.raises(NotChecked, match="was not read"):
            expected(e.name, gap)


def test_the_releases_platform_teams_run() -> None:
    # 2.59.0 / 2.60.0: exactly what the experiments asserted before the table existed.
    for version in ("2.59.0", "2.60.0"):
        assert expected("actor_died_error", version) == "ActorDiedError"
        for reason in (RETRIES_DISABLED, MAX_ATTEMPTS_EXCEEDED, LINEAGE_EVICTED):
            assert lost_object_error(reason, version) == "ObjectReconstructionFailedError"
        assert applies("lost_object_reason", version)
        assert applies("ray_nodes_death_record", version)
        assert expected("owner_died_location", version) == "owner node ID: {node_id}"
        assert expected("node_died_message", version) == "Node IP: {ip}"
        assert applies("rocksdb_gcs", version)
    # 2.55.1: the reason-carrying class, but no owner node id and no RocksDB yet.
    assert lost_object_error(LINEAGE_EVICTED, "2.55.1") == "ObjectReconstructionFailedError"
    assert expected("owner_died_location", "2.55.1") == "at IP address {ip}"
    assert not applies("rocksdb_gcs", "2.55.1")
    # 2.50.1: what failed there (ActorDiedError already; the old subclasses, no .reason).
    assert expected("actor_died_error", "2.50.1") == "ActorDiedError"
    assert lost_object_error(RETRIES_DISABLED, "2.50.1") == "ObjectLostError"
    assert (
        lost_object_error(MAX_ATTEMPTS_EXCEEDED, "2.50.1")
        == "ObjectReconstructionFailedMaxAttemptsExceededError"
    )
    assert (
        lost_object_error(LINEAGE_EVICTED, "2.50.1")
        == "ObjectReconstructionFailedLineageEvictedError"
    )
    assert not applies("lost_object_reason", "2.50.1")
    assert applies("ray_nodes_death_record", "2.50.1")
    assert expected("node_died_message", "2.50.1") == "The node IP: {ip}"
    assert not applies("rocksdb_gcs", "2.50.1")


def test_pinned_first_releases() -> None:
    firsts = {e.name: e.since for e in EXPECTATIONS if e.pinned}
    assert firsts == {
        "core_worker_unavailable_backoff": "2.51.0",
        "lost_object_reason": "2.54.0",
        "lost_retries_disabled_error": "2.54.0",
        "lost_max_attempts_exceeded_error": "2.54.0",
        "lost_lineage_evicted_error": "2.54.0",
        "owner_died_location": "2.56.0",
        "owner_death_cause": "2.51.0",
        "raylet_unavailable_backoff": "2.51.0",
        "rocksdb_gcs": "2.57.0",
    }


def test_message_templates_format_with_either_field() -> None:
    for name in ("owner_died_location", "node_died_message"):
        for version in ("2.50.1", "2.60.0"):
            text = expected(name, version).format(node_id="ab12", ip="10.0.0.3")
            assert "{" not in text and ("ab12" in text or "10.0.0.3" in text), text


def test_unknown_names_and_reasons_say_what_is_known() -> None:
    with pytest.raises(KeyError, match="rocksdb_gcs"):
        expected("rocksdb", "2.60.0")
    with pytest.raises(KeyError, match=RETRIES_DISABLED):
        lost_object_error("OBJECT_UNRECONSTRUCTABLE_PUT", "2.60.0")


def test_the_skip_reason_names_the_first_release_and_the_evidence() -> None:
    reason = absent_reason("rocksdb_gcs")
    assert reason.startswith("rocksdb_gcs applies from Ray 2.57.0 (")
    assert "gcs_server" in reason and "2.56.1" in reason


def test_expectations_are_frozen() -> None:
    e = expectation("rocksdb_gcs")
    with pytest.raises(AttributeError):
        e.since = "2.50.1"  # type: ignore[misc]


def test_read_is_oldest_first_and_known() -> None:
    assert list(READ) == sorted(READ, key=key)
    assert set(READ) <= set(releases.shipped())


def test_exported_from_chaos_check() -> None:
    for name in ("Expectation", "NotChecked", "expected", "applies", "lost_object_error"):
        assert name in chaos.check.__all__


def test_experiments_compare_no_release_inline() -> None:
    # Version differences live in chaos.check.expectations, not in the experiments.
    for path in sorted(EXPERIMENTS.glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        assert "at_least(" not in text, path.name
        assert not re.search(r"""["']2\.\d+\.\d+["']""", text), path.name
