"""Booting the next test's cluster ahead: who is eligible, what is taken, what is removed.

The cluster is a stand-in with ``start`` and ``check_still_ready`` (the real boot is proven in
tests/integration/test_boot.py); the rules here are the ones no daemon is needed for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from chaos.errors import ClusterBootTimeout
from chaos.plugin.boot_ahead import NO_BOOT_AHEAD, BootAhead, eligible
from chaos.plugin.interrupts import INTERRUPTED
from chaos.spec.topology import ClusterSpec, NodeSpec

SPEC = ClusterSpec()
OTHER = ClusterSpec(workers=(NodeSpec(name="worker", count=3),))


@dataclass
class FakeItem:
    fixturenames: tuple[str, ...] = ("ray_cluster",)
    markers: dict[str, pytest.Mark] = field(default_factory=dict)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.markers.get(name)


def mark(name: str, **kwargs: Any) -> dict[str, pytest.Mark]:
    return {name: getattr(pytest.mark, name)(**kwargs).mark}


class FakeCluster:
    def __init__(self, fail: BaseException | None = None, ready: bool = True) -> None:
        self.fail, self.ready = fail, ready
        self.release = threading.Event()
        self.started = False
        self.background = False
        self.booted_in_background = False

    def start(self) -> FakeCluster:
        self.booted_in_background = self.background
        self.release.wait(10)
        if self.fail is not None:
            raise self.fail
        self.started = True
        return self

    def check_still_ready(self, timeout: float) -> None:
        if not self.ready:
            raise ClusterBootTimeout("node worker-1 is DEAD")


@pytest.fixture
def removed() -> list[tuple[Any, str]]:
    return []


@pytest.fixture
def ahead(removed: list[tuple[Any, str]]) -> BootAhead:
    return BootAhead(lambda cluster, why: removed.append((cluster, why)))


def booted(ahead: BootAhead, nodeid: str, cluster: FakeCluster, spec: ClusterSpec = SPEC) -> None:
    ahead.start(nodeid, spec, cluster, "")  # type: ignore[arg-type]
    cluster.release.set()


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (FakeItem(), True),
        (None, False),
        (FakeItem(fixturenames=("ray_cluster_factory",)), False),
        (FakeItem(markers=mark(NO_BOOT_AHEAD)), False),
        (FakeItem(markers=mark("skip")), False),
        (FakeItem(markers=mark("skipif")), False),
        (FakeItem(markers=mark("xfail", run=False)), False),
        (FakeItem(markers=mark("xfail", strict=True)), True),
    ],
)
def test_only_a_test_whose_cluster_is_its_marker_is_booted_ahead(
    item: FakeItem | None, expected: bool
) -> None:
    assert eligible(item) is expected  # type: ignore[arg-type]


def test_the_next_test_takes_its_cluster(ahead: BootAhead, removed: list[Any]) -> None:
    cluster = FakeCluster()
    booted(ahead, "t::next", cluster)
    taken: Any
    taken, why = ahead.take("t::next", SPEC)
    assert taken is cluster and cluster.started and why == ""
    assert cluster.booted_in_background, "a boot beside running experiments has no CPU weight"
    assert not cluster.background, "the test's own restarts are foreground boots"
    assert ahead.pending is None and removed == []


@pytest.mark.parametrize(
    ("nodeid", "spec", "fail", "ready", "why"),
    [
        ("t::other", SPEC, None, True, "booted ahead for t::next"),
        ("t::next", OTHER, None, True, "asks for another spec"),
        ("t::next", SPEC, ClusterBootTimeout("node head never ALIVE"), True, "failed"),
        ("t::next", SPEC, None, False, "no longer ALIVE"),
    ],
)
def test_a_cluster_that_is_not_provably_the_tests_is_removed_not_taken(
    ahead: BootAhead,
    removed: list[Any],
    nodeid: str,
    spec: ClusterSpec,
    fail: BaseException | None,
    ready: bool,
    why: str,
) -> None:
    cluster = FakeCluster(fail, ready)
    booted(ahead, "t::next", cluster)
    taken, reason = ahead.take(nodeid, spec)
    assert taken is None and why in reason
    assert [c for c, _ in removed] == [cluster]


def test_an_unclaimed_cluster_goes_after_its_tests_teardown_only(
    ahead: BootAhead, removed: list[Any]
) -> None:
    cluster = FakeCluster()
    booted(ahead, "t::next", cluster)
    ahead.discard("t::current")
    assert removed == [] and ahead.pending is not None
    ahead.discard("t::next")
    assert [c for c, _ in removed] == [cluster] and ahead.pending is None


def test_a_new_boot_ahead_removes_the_one_before(ahead: BootAhead, removed: list[Any]) -> None:
    first, second = FakeCluster(), FakeCluster()
    booted(ahead, "t::a", first)
    booted(ahead, "t::b", second)
    assert [c for c, _ in removed] == [first]
    taken: Any = ahead.take("t::b", SPEC)[0]
    assert taken is second


def test_interrupted_leaves_it_to_the_reaper(ahead: BootAhead, removed: list[Any]) -> None:
    cluster = FakeCluster()
    ahead.start("t::next", SPEC, cluster, "")  # type: ignore[arg-type]
    INTERRUPTED.set()
    try:
        ahead.discard()  # returns at once: the boot is not waited for
        assert removed == [] and ahead.pending is None
    finally:
        INTERRUPTED.clear()
        cluster.release.set()
