"""Where a test's time went besides its body: booting, queueing for a boot slot, teardown.

The cluster factory attaches one ``raychaos timing`` JSON per test (its teardown, an Allure
fixture "after"; the format: :mod:`chaos.report.timing`); ``raychaos bench suite``
(:mod:`chaos.bench.suite`) adds them up over a run. The boot figures come from each
cluster's own history (``boot_slot``: the seconds queued for a slot; ``cluster_ready``:
booting after the slot was taken, and the whole
:meth:`~chaos.cluster.cluster.Cluster.start` with image checks and network creation).

Each node's CPU-seconds by phase come from its container's cgroup counter, which the factory
reads (:mod:`chaos.cluster.cpu`) at three points and hands to :func:`cpu_sample`: the
cluster ready, the test body's end and just before removal. Boot is the counter at ready,
body and teardown the differences; a failed read leaves its phases None (missing).
"""

from __future__ import annotations

import contextlib
import json
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chaos.history import Kind
from chaos.report.timing import CPU_POINTS, TIMING

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: Seconds each cluster's removal took, until the factory attaches them.
_REMOVED: weakref.WeakKeyDictionary[Cluster, float] = weakref.WeakKeyDictionary()
#: Clusters booted during the previous test and taken by this one: seconds the test waited.
_ADOPTED: weakref.WeakKeyDictionary[Cluster, float] = weakref.WeakKeyDictionary()
#: Per cluster: point → node → its container's CPU-seconds so far (None: the read failed).
_CPU: weakref.WeakKeyDictionary[Cluster, dict[str, dict[str, float | None]]] = (
    weakref.WeakKeyDictionary()
)


def cpu_sample(cluster: Cluster, point: str, seconds: dict[str, float | None]) -> None:
    """Keep the node CPU-seconds read at ``point`` (one of :data:`CPU_POINTS`)."""
    _CPU.setdefault(cluster, {})[point] = dict(seconds)


def _since(later: float | None, earlier: float | None) -> float | None:
    if later is None or earlier is None:
        return None
    # A counter that went back: the node restarted (a new cgroup); its CPU since then is
    # what is known, a lower bound.
    return round(later - earlier if later >= earlier else later, 3)


def cpu_phases(samples: dict[str, dict[str, float | None]]) -> dict[str, dict[str, float | None]]:
    """Per node, CPU-seconds of boot, body and teardown from the samples at each point.

    A point never read leaves the phases it bounds None. A node absent at a point that was
    read, and at every point before it, did not exist yet (added during the test): it counts
    from zero there; absent after being read, it is missing.
    """
    nodes = list(dict.fromkeys(n for point in CPU_POINTS for n in samples.get(point, {})))
    found: dict[str, dict[str, float | None]] = {}
    for node in nodes:
        at: list[float | None] = []
        for point in CPU_POINTS:
            read = samples.get(point)
            seen = any(node in samples.get(p, {}) for p in CPU_POINTS[: len(at)])
            at.append(None if read is None else read.get(node, None if seen else 0.0))
        found[node] = {
            "boot": None if at[0] is None else round(at[0], 3),
            "body": _since(at[1], at[0]),
            "teardown": _since(at[2], at[1]),
        }
    return found


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
    samples = _CPU.pop(cluster, None)
    if samples:
        found["cpu_s"] = cpu_phases(samples)
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
