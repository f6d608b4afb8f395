"""VER-01 … VER-03 and PEND-03's verdicts (as the version-skew experiments judge them) on what a
skewed node's ``ray start`` and a skewed driver's ``ray.init`` left (texts as
docs/evidence/cluster-behaviour.md quotes them)."""

from __future__ import annotations

from dataclasses import replace

from chaos.workload.run import RemoteError
from experiments.verdicts.versions import (
    RayStart,
    Registration,
    mismatched_node_uncounted,
    other_release_driver_refused,
    other_release_rejected,
    patch_skew_rejected,
    patch_skew_warns_at_minor,
)

OTHER = "2.59.0"


def mismatch(ours: str, theirs: str) -> str:
    return (
        "Version mismatch: The cluster was started with:\n"
        f"    Ray: 2.60.0\n    Python: {ours}\n"
        "This process on node 10.0.0.4 was started with:\n"
        f"    Ray: {OTHER}\n    Python: {theirs}\n"
    )


SKEWED = RayStart("skewed", 1, "Traceback …\nRuntimeError: " + mismatch("3.11.2", "3.11.2"), 4.0)
STATUS = "Total Usage:\n 0.0/2.0 CPU\n 0B/1.2GiB memory\n"
NODES = "head 10.0.0.2 ALIVE\nworker-1 10.0.0.3 ALIVE\n"
UNSEEN = Registration("skewed", "10.0.0.4", NODES, STATUS, 2)


def test_ver01_a_worker_of_another_release_is_rejected_and_never_registers() -> None:
    held = other_release_rejected(SKEWED, UNSEEN, OTHER)
    assert held.held and held.claim == "VER-01", held.reason
    assert [(m.name, m.value) for m in held.measured] == [("ray start → exit (s)", 4.0)]
    started = other_release_rejected(
        replace(SKEWED, rc=0, log="Ray runtime started."), UNSEEN, OTHER
    )
    assert started.outcome == "failed"
    assert "must fail, exited 0" in started.reason
    slow = other_release_rejected(replace(SKEWED, took=75.0), UNSEEN, OTHER)
    assert "took 75 s" in slow.reason
    assert slow.measured[0].value == 75.0


def test_pend03_a_node_that_never_joined_counts_for_nothing() -> None:
    held = mismatched_node_uncounted(UNSEEN)
    assert held.held and held.claim == "PEND-03", held.reason
    listed = replace(UNSEEN, nodes=NODES + "skewed 10.0.0.4 ALIVE\n")
    assert "must never register" in mismatched_node_uncounted(listed).reason
    counted = mismatched_node_uncounted(replace(UNSEEN, status="Total Usage:\n 0.0/3.0 CPU\n"))
    assert counted.outcome == "failed"
    assert "ray status must not count skewed" in counted.reason
    # VER-01 says "never registered" too.
    registered = other_release_rejected(SKEWED, listed, OTHER)
    assert registered.outcome == "failed" and registered.claim == "VER-01"


PATCHED = RayStart("patched", 1, mismatch("3.11.2", "3.11.7"), 6.0)


def test_ver02_a_patch_release_is_rejected_by_default() -> None:
    seen = replace(UNSEEN, node="patched")
    held = patch_skew_rejected(PATCHED, seen, "3.11.2", "3.11.7")
    assert held.held and held.claim == "VER-02", held.reason
    unnamed = patch_skew_rejected(PATCHED, seen, "3.11.2", "3.11.8")
    assert unnamed.outcome == "failed"
    assert "must name Python 3.11.2 and 3.11.8" in unnamed.reason
    joined = patch_skew_rejected(replace(PATCHED, rc=0), seen, "3.11.2", "3.11.7")
    assert "must fail, exited 0" in joined.reason


WARNED = RayStart(
    "patched",
    0,
    "Python patch version mismatch: The cluster was started with:\n    Python: 3.11.2\n"
    "This process on node 10.0.0.4 was started with:\n    Python: 3.11.7\n"
    "Ray runtime started.",
    9.0,
)
INTERPRETERS = {"driver": {"python": "3.11.2"}, "remote": {"python": "3.11.7"}}


def test_ver02_a_patch_release_joins_with_a_warning_at_minor() -> None:
    held = patch_skew_warns_at_minor(WARNED, INTERPRETERS, "3.11.2", "3.11.7")
    assert held.held and held.claim == "VER-02", held.reason
    refused = patch_skew_warns_at_minor(PATCHED, INTERPRETERS, "3.11.2", "3.11.7")
    assert refused.outcome == "failed"
    assert "must succeed, exited 1" in refused.reason
    both = replace(WARNED, log=WARNED.log + "\n" + mismatch("3.11.2", "3.11.7"))
    assert (
        "a warning, not the rejection"
        in patch_skew_warns_at_minor(both, INTERPRETERS, "3.11.2", "3.11.7").reason
    )
    elsewhere = {**INTERPRETERS, "remote": {"python": "3.11.2"}}
    assert (
        "must run on Python 3.11.7"
        in patch_skew_warns_at_minor(WARNED, elsewhere, "3.11.2", "3.11.7").reason
    )


def test_ver03_a_driver_of_another_release_is_refused() -> None:
    error = RemoteError.from_json(
        {"type": "RuntimeError", "bases": ["Exception"], "message": mismatch("3.11.2", "3.11.2")}
    )
    held = other_release_driver_refused(error, None, OTHER)
    assert held.held and held.claim == "VER-03", held.reason
    connected = other_release_driver_refused(None, {"connected": True}, OTHER)
    assert connected.outcome == "failed"
    assert "must not connect" in connected.reason
    other = RemoteError.from_json({"type": "ConnectionError", "message": "GCS unreachable"})
    assert "expected a RuntimeError" in other_release_driver_refused(other, None, OTHER).reason
