"""A template experiment to copy: one claim, in five phases — boot, load, strike, record,
judge — with the verdict a pure function of what the run recorded.

Copy this file and ``my_workloads/`` into your repository, keep ``pytest.ini``'s
``raychaos_workloads`` line, and change the claim, the cluster, the workload and ``judge``.
Run it with ``pytest test_template.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from chaos.testing import KILL_PROCESS, Experiment, Judging, strike_on, verdict

#: The claim judged: an id of the catalogue (``raychaos claims``).
CLAIM = "TASK-01"


@verdict(CLAIM)
def judge(j: Judging, seen: dict[str, Any]) -> str:
    """The verdict over the workload's result: the evidence when the claim held; a failed
    ``j.require`` names what was seen. No Docker here: unit-test it on recorded results (a
    ``Verdict``: held, failed, or unknown when the record cannot decide)."""
    j.measure(f"{CLAIM} executions", seen["executions"])
    j.require(
        seen["executions"] == 2, f"one retry after the crash: {seen['executions']} executions"
    )
    j.require(seen["value"]["execution"] == 2, f"the retry must be what returned: {seen['value']}")
    return f"the task came back from its retry ({seen['executions']} executions)"


# boot: the cluster the claim needs, no more (the head runs the driver and no work).
@pytest.mark.claim(CLAIM)
@pytest.mark.cluster(
    driver=False, head={"num_cpus": 0}, workers=[{"name": "worker-1", "count": 1, "num_cpus": 1}]
)
def test_a_killed_worker_process_is_retried(experiment: Experiment) -> None:
    # load: the workload runs in the cluster and says where to strike.
    run = experiment.cluster.run("my_workloads.retry:crash_once", on="worker-1", timeout=300)
    # strike: the worker process it named, through the nemesis (verified, in the history).
    strike_on(experiment, run, "running", KILL_PROCESS)
    # record: what the run saw.
    seen = run.result(timeout=240)
    # judge: pure; the experiment records what it measured and its verdict (raises unless held).
    experiment.judge(judge(seen))


def test_the_verdict_fails_without_a_retry() -> None:
    """The verdict's own test: no cluster, recorded data."""
    failed = judge({"executions": 1, "value": {"execution": 1}})
    assert failed.outcome == "failed"
    assert "one retry" in failed.reason
    held = judge({"executions": 2, "value": {"execution": 2}})
    assert held.held
    assert "2 executions" in held.reason
