"""Each node's own CPU time, from its container's cgroup, read inside the node.

One ``sh -c`` exec per node, all nodes at once: the counter is the whole container's (every
Ray process and the harness's probes in it), since the container started. cgroup v2 says
``usage_usec`` in ``/sys/fs/cgroup/cpu.stat``; v1 says nanoseconds in ``cpuacct.usage``. A
read that fails (a killed or paused node, an engine that did not answer) is None: a benchmark
figure missing, never a test failing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: The node's cgroup CPU counter, tagged with the cgroup version it came from.
READ_CGROUP = (
    "if [ -r /sys/fs/cgroup/cpu.stat ] && grep -q usage_usec /sys/fs/cgroup/cpu.stat; "
    "then echo v2; cat /sys/fs/cgroup/cpu.stat; "
    "else echo v1; cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null "
    "|| cat /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage; fi"
)
#: Seconds one read may take inside the node.
READ_TIMEOUT_S = 10.0


def parse_cgroup_cpu(output: str) -> float | None:
    """CPU-seconds from :data:`READ_CGROUP`'s output; None when it says nothing readable."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines or lines[0] not in ("v1", "v2"):
        return None
    if lines[0] == "v2":
        for line in lines[1:]:
            key, _, value = line.partition(" ")
            if key == "usage_usec" and value.strip().isdigit():
                return int(value) / 1e6
        return None
    value = lines[1] if len(lines) > 1 else ""
    return int(value) / 1e9 if value.isdigit() else None


def node_cpu_seconds(cluster: Cluster, name: str) -> float | None:
    """``name``'s container CPU-seconds so far; None when the read failed."""
    try:
        done = cluster.exec(name, ["sh", "-c", READ_CGROUP], timeout=READ_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a killed or paused node: the figure is missing
        return None
    return parse_cgroup_cpu(done.output) if done.ok else None


def cluster_cpu_seconds(cluster: Cluster) -> dict[str, float | None]:
    """Every node's container CPU-seconds so far, read concurrently (one exec per node)."""
    names = list(cluster.nodes)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        found = list(pool.map(lambda name: node_cpu_seconds(cluster, name), names))
    return dict(zip(names, found, strict=True))
