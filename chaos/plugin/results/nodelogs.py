"""Every node's logs, for the report of a test that failed: what a platform team reads first.

Per node: the host's own output (``ray start``), the list of Ray's session log files, and the
tail of each of Ray's own process logs (raylet, GCS, monitor, dashboard, agents) — bounded, so
a report stays small. A node whose host is down (killed, stopped) still has its files: they are
copied to a node that runs and read there. Diagnostics never raise: what cannot be read says
why in the text.
"""

from __future__ import annotations

import contextlib
import shlex
from typing import TYPE_CHECKING

from chaos.spec.plan import RAY_LOGS
from chaos.steps import step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: Ray's per-process logs worth reading after a failure, in the order a reader wants them.
LOG_FILES = (
    "raylet.out",
    "raylet.err",
    "gcs_server.out",
    "gcs_server.err",
    "monitor.log",
    "monitor.out",
    "monitor.err",
    "dashboard.log",
    "dashboard_agent.log",
    "runtime_env_agent.log",
    "log_monitor.log",
)
#: The last bytes kept of each Ray log, and the last lines of the host's output.
TAIL_BYTES = 24_000
HOST_LINES = 200
#: Where a down node's files are copied to be read (on a node that runs).
COPY_DIR = "/tmp/raychaos-node-logs"


def _tail_script(directory: str) -> str:
    names = " ".join(shlex.quote(n) for n in LOG_FILES)
    return (
        f"cd {shlex.quote(directory)} 2>/dev/null || {{ echo '(no Ray logs in {directory})'; "
        "exit 0; }; "
        'echo "== Ray logs in $(pwd -P) =="; ls -l | head -n 60; '
        f'for f in {names}; do [ -s "$f" ] || continue; '
        f'echo; echo "== $f ($(wc -c < "$f") bytes; the last {TAIL_BYTES}) =="; '
        f'tail -c {TAIL_BYTES} "$f"; done'
    )


def _reader(cluster: Cluster, down: str) -> str | None:
    """A node whose host runs, to read a down node's copied files on."""
    for node in [cluster.driver, cluster.head, *cluster.nodes.values()]:
        if node.name != down and node.role != "redis":
            with contextlib.suppress(Exception):
                if cluster.backend.state(node.name) == "running":
                    return node.name
    return None


def _ray_logs_of_down_node(cluster: Cluster, node: str) -> str:
    reader = _reader(cluster, node)
    if reader is None:
        return "(Ray logs unread: no node of the cluster runs to read them on)"
    into = f"{COPY_DIR}/{node}"
    made = cluster.exec(reader, ["sh", "-c", f"rm -rf {into} && mkdir -p {into}"], timeout=15)
    if made.exit_code != 0:
        return f"(Ray logs unread: could not prepare {reader}:{into}: {made.output[-200:]})"
    for name in LOG_FILES:
        # Absent files (a node that never started a GCS) are the common case: skipped.
        with contextlib.suppress(Exception):
            cluster.backend.copy(node, f"{RAY_LOGS}/{name}", reader, into)
    out = cluster.exec(reader, ["sh", "-c", _tail_script(into)], timeout=30)
    return f"(the host is down: files copied to {reader}:{into})\n{out.output}"


def node_log(cluster: Cluster, node: str) -> str:
    """What ``node`` logged: host output, Ray's log files listed, each process log's tail."""
    parts = [f"==== {node}: host output (ray start), the last {HOST_LINES} lines ===="]
    try:
        parts.append(cluster.backend.logs(node, tail=HOST_LINES))
    except Exception as exc:  # noqa: BLE001 - diagnostics never raise
        parts.append(f"(unavailable: {exc})")
    if cluster.node(node).role == "redis":
        return "\n".join(parts)
    try:
        state = cluster.backend.state(node)
        if state == "running":
            out = cluster.exec(node, ["sh", "-c", _tail_script(RAY_LOGS)], timeout=30)
            parts.append(out.output)
        elif state == "paused":
            parts.append("(Ray logs unread: the node is paused)")
        elif state == "gone":
            parts.append("(Ray logs unread: the node's host is gone)")
        else:
            parts.append(_ray_logs_of_down_node(cluster, node))
    except Exception as exc:  # noqa: BLE001 - diagnostics never raise
        parts.append(f"(Ray logs unavailable: {exc})")
    return "\n".join(parts)


def attach_node_logs(cluster: Cluster, why: str) -> None:
    """Attach every node's log to the running test's Allure result, one attachment per node."""
    try:
        import allure
    except ImportError:
        return
    with step(f"evidence: the log of every node of {cluster.spec.name} ({why})"):
        for name in list(cluster.nodes):
            with contextlib.suppress(Exception):
                allure.attach(
                    node_log(cluster, name),
                    name=f"log: {name}",
                    attachment_type=allure.attachment_type.TEXT,
                )
