"""Boot the next test's cluster while the current test runs (``--raychaos-boot-ahead``).

Why: in a suite run much of the time outside experiment bodies is tests waiting for their
cluster, booting or queued for a boot slot. An xdist worker runs its tests one after another
and pytest names the next one (``pytest_runtest_protocol``'s ``nextitem``). Once the current
test's own cluster is up and its body starts, the next test's cluster boots in a background
thread through the same boot slots (never more boots at once than before) and at the default
CPU weight: a foreground boot's weight (``readiness.boot_priority``) would take CPU from the
experiments running beside it. Off by default: where boots are CPU-bound it costs more than it
saves (measurements: docs/performance.md); it pays off where cores are spare.

Only when it is provably the same cluster: the next test asks for ``ray_cluster``, carries no
``skip``/``skipif``/``xfail(run=False)`` or ``no_boot_ahead`` marker, and its spec comes from
its ``cluster`` marker. Its factory adopts the cluster only when the spec it asks for equals
the one booted (a module that overrides ``cluster_spec`` still gets its own cluster, at the
cost of one wasted boot — such modules carry ``no_boot_ahead``) and every node is still ALIVE
in the GCS; otherwise it removes it and boots its own. A failed ahead boot is removed and the
test boots normally: the test sees exactly what it would have seen without boot-ahead.

Nothing leaks: an ahead cluster nobody adopts is removed after its test's teardown, or at the
end of the session; an interrupted or killed run leaves it to the reaper and the next run's
sweep, like every cluster of the process (same run and owner labels).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.errors import ChaosError
from chaos.plugin.interrupts import INTERRUPTED
from chaos.plugin.terminal import say

if TYPE_CHECKING:
    import pytest

    from chaos.cluster.cluster import Cluster
    from chaos.spec.topology import ClusterSpec

#: Markers that keep a test from being booted ahead (its own boot happens at its set-up).
NO_BOOT_AHEAD = "no_boot_ahead"
#: Seconds an adopted cluster has to show every node ALIVE again (it booted already).
RECHECK_S = 30.0


@dataclass
class Ahead:
    """A cluster booting (or booted) for the test ``nodeid``."""

    nodeid: str
    spec: ClusterSpec
    cluster: Cluster
    thread: threading.Thread | None = None
    error: BaseException | None = None

    def wait(self) -> None:
        """Until the boot thread ends; a Ctrl-C (KeyboardInterrupt) still gets through."""
        while self.thread is not None and self.thread.is_alive():
            self.thread.join(0.5)


def eligible(item: pytest.Item | None) -> bool:
    """``item`` would boot ``ray_cluster`` from its ``cluster`` marker, unconditionally."""
    if item is None or "ray_cluster" not in getattr(item, "fixturenames", ()):
        return False
    if item.get_closest_marker(NO_BOOT_AHEAD) or item.get_closest_marker("skip"):
        return False
    if item.get_closest_marker("skipif"):  # its condition is only known at set-up
        return False
    xfail = item.get_closest_marker("xfail")
    return not (xfail is not None and xfail.kwargs.get("run") is False)


class BootAhead:
    """At most one cluster booting ahead per pytest process (one per xdist worker)."""

    def __init__(self, remove: Callable[[Cluster, str], None]) -> None:
        #: How a cluster nobody takes is removed (the factory's teardown of one cluster).
        self._remove = remove
        self._pending: Ahead | None = None
        self._lock = threading.Lock()

    @property
    def pending(self) -> Ahead | None:
        return self._pending

    def start(self, nodeid: str, spec: ClusterSpec, cluster: Cluster, engine_id: str) -> None:
        """Boot ``cluster`` (not started yet) for the test ``nodeid`` in a daemon thread."""
        self.discard()
        ahead = Ahead(nodeid, spec, cluster)
        ahead.thread = threading.Thread(
            target=self._boot, args=(ahead, engine_id), name="raychaos-boot-ahead", daemon=True
        )
        with self._lock:
            self._pending = ahead
        ahead.thread.start()

    @staticmethod
    def _boot(ahead: Ahead, engine_id: str) -> None:
        from chaos.cluster.boot_slots import engine_scope

        # A thread starts with an empty context: the boot slots are the engine's again.
        try:
            ahead.cluster.background = True
            with engine_scope(engine_id):
                ahead.cluster.start()
        except BaseException as exc:  # noqa: BLE001 - reported when the test takes it
            ahead.error = exc
        finally:
            # Its test's restarts are foreground boots again, as on any other cluster.
            ahead.cluster.background = False

    def take(self, nodeid: str, spec: ClusterSpec) -> tuple[Cluster | None, str]:
        """The cluster booted for ``nodeid`` if it is ``spec`` and ready, else (None, why);
        a cluster not handed over is removed."""
        with self._lock:
            ahead, self._pending = self._pending, None
        if ahead is None:
            return None, "none booted ahead"
        if ahead.nodeid != nodeid or ahead.spec != spec:
            why = (
                f"booted ahead for {ahead.nodeid}"
                if ahead.nodeid != nodeid
                else "booted ahead from its marker, but the test asks for another spec"
            )
            self._drop(ahead, why)
            return None, why
        ahead.wait()
        if ahead.error is not None:
            why = f"the boot ahead failed: {type(ahead.error).__name__}: {ahead.error}"
            self._drop(ahead, why)
            return None, why
        try:
            ahead.cluster.check_still_ready(RECHECK_S)
        except ChaosError as exc:
            why = f"a node of the cluster booted ahead is no longer ALIVE: {exc}"
            self._drop(ahead, why)
            return None, why
        return ahead.cluster, ""

    def discard(self, nodeid: str | None = None) -> None:
        """Remove the cluster booting ahead (only if it is for ``nodeid``, when given)."""
        with self._lock:
            ahead = self._pending
            if ahead is None or (nodeid is not None and ahead.nodeid != nodeid):
                return
            self._pending = None
        self._drop(ahead, "its test did not take it")

    def _drop(self, ahead: Ahead, why: str) -> None:
        if INTERRUPTED.is_set():
            return  # a boot cannot be cut short: the reaper removes it when the process ends
        ahead.wait()
        self._remove(ahead.cluster, why)


def _remove_unused(cluster: Cluster, why: str) -> None:
    """Remove a cluster booted ahead that no test took (its reason on the terminal)."""
    key = getattr(cluster.backend, "key", cluster.spec.name)
    try:
        cluster.stop()
    except ChaosError as exc:
        say(f"raychaos: removing cluster {key}, booted ahead ({why}), failed: {exc}")


#: This process's cluster booting ahead for its next test (started by
#: :meth:`chaos.plugin.factory.ClusterFactory.boot_ahead`, dropped by :mod:`chaos.plugin.hooks`).
BOOT_AHEAD = BootAhead(_remove_unused)
