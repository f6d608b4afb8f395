"""ADVICE-01 … ADVICE-04's verdicts on records shaped as ``workloads.advice`` reports them
(numbers from docs/evidence/data/advice.json)."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from experiments.verdicts.advice import (
    KNOB,
    RunbookOptions,
    global_strategy_rejected,
    runbook_options_rejected,
    submit_job_refuses_max_resources,
    throughput_knob_changes_nothing,
)


def rejected(flag: str, seconds: float) -> dict[str, Any]:
    usage = ["Usage: ray start [OPTIONS]", "Try 'ray start --help' for help.", ""]
    return {
        "rc": 2,
        "seconds": seconds,
        "output_tail": [*usage, f"Error: No such option '{flag}'."],
    }


CLI: dict[str, Any] = {
    "in_help": {"--memory-monitor-interval-ms": False, "--raylet-death-on-oom": False},
    "--memory-monitor-interval-ms=100": rejected("--memory-monitor-interval-ms", 5.22),
    "--raylet-death-on-oom=false": rejected("--raylet-death-on-oom", 8.45),
}
BOOT_LOG = (
    "Usage: ray start [OPTIONS]\nTry 'ray start --help' for help.\n\n"
    "Error: No such option '--memory-monitor-interval-ms'.\n"
)
SETTINGS = {
    "memory_monitor_refresh_ms": ["_raylet.so", "core/src/ray/raylet/raylet"],
    "memory_usage_threshold": ["_raylet.so", "core/src/ray/raylet/raylet"],
}
OPTIONS = RunbookOptions(CLI, 2, BOOT_LOG, False, SETTINGS)


def test_advice01_options_that_do_not_exist_are_rejected() -> None:
    held = runbook_options_rejected(OPTIONS)
    assert held.held and held.claim == "ADVICE-01", held.reason
    listed = deepcopy(CLI)
    listed["in_help"]["--raylet-death-on-oom"] = True
    assert (
        "must not be in ray start --help"
        in runbook_options_rejected(replace(OPTIONS, cli=listed)).reason
    )
    joined = runbook_options_rejected(replace(OPTIONS, boot_rc=0, boot_registered=True))
    assert joined.outcome == "failed"
    assert "must exit 2" in joined.reason
    assert (
        "never register" in runbook_options_rejected(replace(OPTIONS, boot_registered=True)).reason
    )


def test_advice01_the_documented_settings_must_be_knobs_of_the_raylet() -> None:
    python_only = {**SETTINGS, "memory_usage_threshold": ["_private/ray_constants.py"]}
    verdict = runbook_options_rejected(replace(OPTIONS, settings=python_only))
    assert verdict.outcome == "failed"
    assert "RAY_memory_usage_threshold" in verdict.reason


INIT = {
    "accepted": False,
    "error": {
        "type": "RuntimeError",
        "message": "Unknown keyword argument(s): scheduling_strategy",
    },
    "connected_after": False,
}


def test_advice02_a_global_strategy_is_rejected() -> None:
    held = global_strategy_rejected(INIT)
    assert held.held and held.claim == "ADVICE-02", held.reason
    connected = global_strategy_rejected({**INIT, "connected_after": True})
    assert connected.outcome == "failed"
    assert "nothing may stay connected" in connected.reason
    assert "must raise RuntimeError" in global_strategy_rejected({"accepted": True}).reason


PARAMS = [
    "entrypoint",
    "job_id",
    "runtime_env",
    "metadata",
    "submission_id",
    "entrypoint_num_cpus",
    "entrypoint_num_gpus",
    "entrypoint_memory",
    "entrypoint_resources",
    "entrypoint_label_selector",
]
QUOTA = {
    "accepted": False,
    "error": {
        "type": "TypeError",
        "message": "JobSubmissionClient.submit_job() got an unexpected keyword argument "
        "'max_resources'",
    },
    "params": PARAMS,
}


def test_advice03_submit_job_has_no_quota() -> None:
    held = submit_job_refuses_max_resources(QUOTA)
    assert held.held and held.claim == "ADVICE-03", held.reason
    added = submit_job_refuses_max_resources({**QUOTA, "params": [*PARAMS, "max_resources"]})
    assert added.outcome == "failed"
    assert "submit_job's parameters" in added.reason
    accepted = submit_job_refuses_max_resources({"accepted": True, "params": PARAMS})
    assert "must raise TypeError" in accepted.reason


SCAN: dict[str, Any] = {
    "name": KNOB,
    "files_scanned": 2658,
    "hits": [],
    "control": "scheduler_spread_threshold",
    "control_hits": ["_raylet.so"],
    "knobs": {f"RAY_{KNOB}": "1"},
}
SERIES = [
    {"n": 2, "counts": {"head": 2, "worker-1": 0, "worker-2": 0}},
    {"n": 4, "counts": {"head": 2, "worker-1": 2, "worker-2": 0}},
    {"n": 6, "counts": {"head": 2, "worker-1": 2, "worker-2": 2}},
    {"n": 12, "counts": {"head": 4, "worker-1": 4, "worker-2": 4}},
]


def test_advice04_the_knob_is_nowhere_and_changes_no_placement() -> None:
    held = throughput_knob_changes_nothing(SCAN, SERIES)
    assert held.held and held.claim == "ADVICE-04", held.reason
    # 2.59 filled the other worker first (2/2/0): the same placement.
    other_first = [*SERIES[:1], {"n": 4, "counts": {"head": 2, "worker-1": 0, "worker-2": 2}}]
    assert throughput_knob_changes_nothing(SCAN, other_first).held
    found = throughput_knob_changes_nothing({**SCAN, "hits": ["_raylet.so"]}, SERIES)
    assert found.outcome == "failed"
    assert f"{KNOB} appears in Ray" in found.reason
    blind = throughput_knob_changes_nothing({**SCAN, "control_hits": []}, SERIES)
    assert "find the control" in blind.reason
    unset = throughput_knob_changes_nothing({**SCAN, "knobs": {}}, SERIES)
    assert "must reach the driver" in unset.reason
    spread = [{"n": 4, "counts": {"head": 1, "worker-1": 2, "worker-2": 1}}]
    moved = throughput_knob_changes_nothing(SCAN, spread)
    assert "n=4: placed" in moved.reason
