"""A graceful stop of a node (CHURN-08): SIGTERM to its blocking ``ray start``.

Kubernetes stops a pod by sending its PID 1 SIGTERM, and a Ray pod's PID 1 is ``ray start
--block``. From Ray 2.57.0 that process drains its own node for preemption before it ends the
rest (``ray/_private/node.py``: ``Node._drain_node_before_shutdown``): the node takes no new
work, its running work may finish, and it ends as soon as its raylet is idle, or at
``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S`` (30 s by default; DRAIN_TIMEOUT_S here, stated in
the evidence). Before 2.57.0 the same signal ended every process at once.

Our nodes run ``ray start`` without ``--block`` (a raylet may then die alone); the two nodes
here ask for it. Workloads: ``workloads.preemption:sigterm``.

Not judged: how the GCS records the death of a node that was still busy at the timeout. The
handler ends the raylet (SIGTERM) the moment its monotonic deadline passes; the raylet records
a preemption only if the drain's wall-clock deadline, computed a fraction of a millisecond
after that monotonic one and truncated to whole milliseconds, is already strictly in the past
(``raylet/main.cc``: ``deadline_timestamp_ms() < current_sys_time_ms()``), and otherwise an
expected termination ("received SIGTERM", and the actor's error is not ``preempted``). Which
one happens is decided within a millisecond; the evidence records which did.
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.testing import (
    GRACEFUL_DRAIN_ENV,
    Experiment,
    WorkloadError,
)

from .verdicts.sigterm import Terminated, drains_before_it_ends

#: The knob, shortened from 30 s: the busy node is ended this long after its SIGTERM.
DRAIN_TIMEOUT_S = 15.0
#: The quiet node's task: it has started before the SIGTERM and ends this long after it began.
#: Measured (docs/evidence/churn.md, CHURN-08, 5 December 2026): the quiet node was DEAD
#: 7.45-7.87 s after its SIGTERM, at most 0.076 s after its task ended (6 runs on 2.60.0,
#: 3 on 2.59.0): the task outlasts the signal and its node ends over 7 s inside DRAIN_TIMEOUT_S.
TASK_S = 8.0


def _blocking(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "count": 1,
        "num_cpus": 1,
        "extra_args": ["--block"],
        "env": {GRACEFUL_DRAIN_ENV: f"{DRAIN_TIMEOUT_S:g}"},
    }


@pytest.mark.claim("CHURN-08")
@pytest.mark.cluster(
    driver=False, head={"num_cpus": 0}, workers=[_blocking("quiet"), _blocking("busy")]
)
def test_a_sigterm_drains_a_blocking_node_before_it_ends(experiment: Experiment) -> None:
    """Two nodes get SIGTERM: ``quiet`` runs a task that ends 8 s in, ``busy`` holds an
    actor call that never ends. Both are drained (the fault is verified by the GCS listing
    them as draining); the task returns from its node, which then ends before the knob's
    timeout, its death recorded as the preemption drain with Ray's SIGTERM message; the busy
    node ends at the timeout, its actor with it."""
    cluster, nemesis = experiment.cluster, experiment.nemesis
    run = cluster.run("workloads.preemption:sigterm", task_s=TASK_S, timeout=600)
    placed = run.wait_for("placed", timeout=180)[0]
    ids = placed.get("ids")
    if placed.get("actor") != ids["busy"] or placed.get("task") != ids["quiet"]:
        raise WorkloadError(f"set-up: the actor on busy and the task on quiet: {placed.fields}")
    quiet = nemesis.terminate_node("quiet")
    busy = nemesis.terminate_node("busy")
    cluster.signal("terminated")
    seen = run.result(timeout=DRAIN_TIMEOUT_S + 300)
    experiment.measure("CHURN-08 knob", {GRACEFUL_DRAIN_ENV: DRAIN_TIMEOUT_S, "task_s": TASK_S})
    for key in ("task", "call", "records", "states", "executions"):
        experiment.measure(f"CHURN-08 {key}", seen[key])
    signalled = [
        Terminated(f.injected_at, f.seen_draining, f.drain_deadline) for f in (quiet, busy)
    ]
    experiment.judge(drains_before_it_ends(seen, signalled[0], signalled[1], DRAIN_TIMEOUT_S))
