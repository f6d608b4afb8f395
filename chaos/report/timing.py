"""The ``raychaos timing`` attachment's format: where a test's time went besides its body.

One JSON attachment per test (written by :mod:`chaos.plugin.results.timing`, read by
``raychaos bench suite``): per cluster, the seconds queued for a boot slot, booting and
tearing down, and each node's container CPU-seconds by phase.
"""

from __future__ import annotations

#: The attachment's name.
TIMING = "raychaos timing"
#: The points at which a cluster's node CPU is read, in order, and the phase each one ends.
CPU_POINTS = ("ready", "body_end", "removal")
PHASES = ("boot", "body", "teardown")
