"""Where a test's time went besides its body: booting, queueing for a boot slot, teardown.

The cluster factory attaches one ``raychaos timing`` JSON per test (its teardown, an Allure
fixture "after"); ``raychaos bench suite`` (:mod:`chaos.bench.suite`) adds them up
over a run. The boot figures come from each cluster's own history (``boot_slot``: the
seconds queued for a slot; ``cluster_ready``: booting after the slot was taken, and the
whole :meth:`~chaos.cluster.cluster.Cluster.start` with image checks and network creation).
"""

from __future__ import annotations

import contextlib
import json
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chaos.history import Kind

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: The attachment's name.
TIMING = "raychaos timing"

#: Seconds each cluster's removal took, until the factory attaches them.
_REMOVED: weakref.WeakKeyDictionary[Cluster, float] = weakref.WeakKeyDictionary()
#: Clusters booted during the previous test and taken by this one: seconds the test waited.
_ADOPTED: weakref.WeakKeyDictionary[Cluster, float] = weakref.WeakKeyDictionary()


def adopted(cluster: Cluster, waited_s: float) -> None:
    """``cluster`` was booted ahead (:mod:`chaos.plugin.boot_ahead`); it waited ``waited_s``."""
    _ADOPTED[cluster] = waited_s


@contextlib.contextmanager
def removing(cluster: Cluster) -> Iterator[None]:
    """Time the removal of ``cluster`` (kept for :func:`attach`, failed or not)."""
    started = time.monotonic()
    try:
        yield
    finally:
        _REMOVED[cluster] = time.monotonic() - started


def cluster_timing(cluster: Cluster) -> dict[str, Any]:
    """One cluster's boot and teardown seconds, as far as they happened."""
    found: dict[str, Any] = {
        "cluster": str(getattr(cluster.backend, "key", cluster.spec.name)),
        "nodes": len(cluster.nodes),
    }
    slot = cluster.history.events(Kind.BOOT_SLOT)
    if slot:
        found["queued_s"] = slot[0].get("queued_s")
    ready = cluster.history.events(Kind.CLUSTER_READY)
    if ready:
        found["boot_s"] = ready[0].get("seconds")
        found["start_s"] = ready[0].get("with_images_s")
    found["booted"] = bool(ready)
    if cluster in _ADOPTED:
        # Booted while the previous test ran: the test itself waited only this long.
        found["ahead"] = True
        found["waited_s"] = round(_ADOPTED[cluster], 2)
    if cluster in _REMOVED:
        found["teardown_s"] = round(_REMOVED.pop(cluster), 2)
    return found


def attach(clusters: Sequence[Cluster]) -> None:
    """The ``raychaos timing`` attachment of the running test; never breaks a run."""
    if not clusters:
        return
    try:
        import allure

        allure.attach(
            json.dumps({"clusters": [cluster_timing(c) for c in clusters]}, indent=1),
            name=TIMING,
            attachment_type=allure.attachment_type.JSON,
        )
    except Exception:  # noqa: BLE001, S110 - timing is a benchmark's input, never a verdict
        pass
