"""Object store and memory (docs: objects/object-spilling, scheduling/ray-oom-prevention,
resources): STORE-01 … STORE-03, OOM-01, OOM-02.

Single-node clusters with a 100 MiB store hold 300 MiB of live ``ray.put`` objects
(``workloads.store:fill_store``); OOM-01 grows a task on a 1 GiB worker with the memory monitor's
threshold lowered to 0.7 (refresh 100 ms) so it acts well before the kernel would; OOM-02 caps
the head with ``--memory`` / ``--object-store-memory``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chaos.check import record
from chaos.experiment import Experiment

HEAD_STORE = {"num_cpus": 2, "object_store": "100m"}
#: 300 MiB of live objects into a 100 MiB store.
FILL: dict[str, Any] = {"total_mb": 300, "size_mb": 10}
SPILL_DIR = "/spill"
SPILL_CONFIG = json.dumps({"type": "filesystem", "params": {"directory_path": SPILL_DIR}})
OOM_KNOBS = {"RAY_memory_usage_threshold": "0.7", "RAY_memory_monitor_refresh_ms": "100"}
MiB = 1024 * 1024


def fill_evidence(experiment: Experiment, claim: str, result: dict[str, Any]) -> None:
    record(experiment, f"{claim} ray memory --stats-only", result["memory_stats"])
    record(
        experiment,
        f"{claim} fill",
        {k: result[k] for k in ("put_ok", "error", "readable", "spilled_mib", "fill_s", "disk")},
    )


@pytest.mark.claim("STORE-01")
@pytest.mark.cluster(driver=False, head=HEAD_STORE, workers=[])
def test_objects_beyond_the_store_spill_to_disk(experiment: Experiment) -> None:
    """300 MiB of live objects in a 100 MiB store: no error, all readable, spilled bytes shown."""
    result = experiment.cluster.run("workloads.store:fill_store", **FILL).result()
    fill_evidence(experiment, "STORE-01", result)
    assert result["store_mib"] == 100
    assert result["error"] is None and result["put_ok"] == 30, result["error"]
    assert result["readable"] == 30, result["read_error"]
    assert result["spilled_mib"] is not None and result["spilled_mib"] >= 150, result[
        "memory_stats"
    ]


@pytest.mark.claim("STORE-02")
@pytest.mark.cluster(
    driver=False,
    head={**HEAD_STORE, "memory": "3g"},
    workers=[],
    env={"RAY_automatic_object_spilling_enabled": "0"},
)
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="FINDING: (2.60 x2, 2.59) with RAY_automatic_object_spilling_enabled=0 (present in "
    "the raylet's /proc environ) all 30 x 10 MiB puts into the 100 MiB store succeed and 240-260 "
    "MiB are spilled: node.py's validate_external_storage sets the system config "
    "automatic_object_spilling_enabled=True, overriding the env knob. No ObjectStoreFullError.",
)
def test_store_full_without_spilling_raises_object_store_full(experiment: Experiment) -> None:
    """With spilling disabled the put that no longer fits raises ``ObjectStoreFullError``."""
    result = experiment.cluster.run(
        "workloads.store:fill_store", **FILL, read_back=False, timeout=600
    ).result()
    fill_evidence(experiment, "STORE-02 env knob", result)
    error = result["error"] or {}
    assert error.get("type") == "ObjectStoreFullError", (
        f"no ObjectStoreFullError: {result['put_ok']} puts succeeded, "
        f"{result['spilled_mib']} MiB spilled, raylet env {result['raylet_env']}"
    )


@pytest.mark.claim("STORE-02")
@pytest.mark.cluster(
    driver=False,
    head={
        **HEAD_STORE,
        "memory": "3g",
        "extra_args": ('--system-config={"automatic_object_spilling_enabled": false}',),
    },
    workers=[],
)
def test_spilling_off_by_system_config_falls_back_to_filesystem(experiment: Experiment) -> None:
    """What Ray does with spilling really off (``--system-config``): nothing spilled, every put
    succeeds through fallback allocation beyond the store, no ``ObjectStoreFullError``."""
    result = experiment.cluster.run(
        "workloads.store:fill_store", **FILL, read_back=True, timeout=600
    ).result()
    fill_evidence(experiment, "STORE-02 system config", result)
    assert result["error"] is None and result["put_ok"] == 30, result["error"]
    assert result["readable"] == 30, result["read_error"]
    assert result["spilled_mib"] is None, "nothing may be spilled with spilling off"
    assert "Plasma filesystem mmap usage" in result["memory_stats"], result["memory_stats"]


@pytest.mark.claim("STORE-03")
@pytest.mark.cluster(
    driver=False,
    head={**HEAD_STORE, "tmpfs": {SPILL_DIR: "size=100m"}},
    workers=[],
    env={"RAY_object_spilling_config": SPILL_CONFIG},
)
def test_full_spill_disk_raises_out_of_disk(experiment: Experiment) -> None:
    """Spill disk (a 100 MiB tmpfs) over ``local_fs_capacity_threshold``: ``OutOfDiskError``."""
    result = experiment.cluster.run(
        "workloads.store:fill_store", **FILL, read_back=False, timeout=600
    ).result()
    fill_evidence(experiment, "STORE-03", result)
    spill_disk = experiment.cluster.exec("head", ["df", "-m", SPILL_DIR]).output
    record(experiment, "STORE-03 df spill disk", spill_disk)
    error = result["error"] or {}
    assert error.get("type") == "OutOfDiskError", result["error"]
    assert "RayError" in error["bases"]
    assert "Local disk is full" in error["message"], error["message"]
    assert error["index"] < 30, "the failing put comes before all 300 MiB are in"


@pytest.mark.claim("OOM-01")
@pytest.mark.cluster(
    driver=False,
    head={"num_cpus": 1},
    workers=[{"name": "worker", "num_cpus": 1, "memory": "1g", "env": OOM_KNOBS}],
)
def test_memory_monitor_kills_the_worker_not_the_node(experiment: Experiment) -> None:
    """Above ``memory_usage_threshold`` the raylet kills the task's worker: ``max_retries=0``
    fails with ``OutOfMemoryError``; ``max_retries=1`` is retried past its budget (OOM retries
    ignore it); exit type NODE_OUT_OF_MEMORY; the node stays ALIVE."""
    result = experiment.cluster.run(
        "workloads.store:oom_task",
        node_name="worker",
        cases=[
            {"max_retries": 0, "heavy_attempts": 1},
            {"max_retries": 1, "heavy_attempts": 3},
        ],
        timeout=600,
    ).result()
    record(experiment, "OOM-01", result)
    no_retry, retried = result["cases"]
    assert not no_retry["ok"] and no_retry["error"]["type"] == "OutOfMemoryError", no_retry
    assert "RayError" in no_retry["error"]["bases"]
    assert no_retry["attempts_on_node"] == 1
    assert [(s["attempt"], s["state"], s["error_type"]) for s in no_retry["state_api"]] == [
        (0, "FAILED", "OUT_OF_MEMORY")
    ], no_retry["state_api"]
    assert retried["ok"] and retried["value"] == {"attempt": 4, "survived_heavy": False}, retried
    assert retried["attempts_on_node"] == 4, "3 OOM kills with max_retries=1: budget ignored"
    assert sorted((s["attempt"], s["state"], s["error_type"]) for s in retried["state_api"]) == [
        (0, "FAILED", "OUT_OF_MEMORY"),
        (1, "FAILED", "OUT_OF_MEMORY"),
        (2, "FAILED", "OUT_OF_MEMORY"),
        (3, "FINISHED", None),
    ], retried["state_api"]
    exits = result["worker_exit_types"]
    oom_exits = sum(v for k, v in exits.items() if "NODE_OUT_OF_MEMORY" in k)
    assert oom_exits >= 4, exits
    assert result["node_alive"], "the node must survive: the raylet kills workers instead"


@pytest.mark.claim("OOM-02")
@pytest.mark.cluster(
    driver=False,
    head={
        "num_cpus": 4,
        "ray_memory": "300m",
        "object_store": "80m",
        "resources": {"headslot": 10},
    },
    workers=[{"name": "worker", "num_cpus": 4}],
)
def test_head_memory_caps_only_declared_work(experiment: Experiment) -> None:
    """``--memory`` limits only actors that declare ``memory=``; undeclared ones still land on
    the head (also by default from a driver there); ``--object-store-memory`` caps its store."""
    result = experiment.cluster.run("workloads.store:logical_memory", declared_mb=150, n=3).result()
    record(experiment, "OOM-02", result)
    assert result["head_memory_mib"] == 300 and result["head_object_store_mib"] == 80, result
    assert result["per_node_object_store_mib"]["worker"] > 80
    assert result["undeclared_on_head"] == {"alive": 3, "pending": 0, "nodes": ["head"] * 3}
    declared = result["declared_on_head"]
    assert (declared["alive"], declared["pending"], declared["expected_fit"]) == (2, 1, 2), declared
    assert declared["states"].count("PENDING_CREATION") == 1, declared
    assert any("'memory': 157286400.0" in line for line in declared["pending_demands"]), declared[
        "pending_demands"
    ]
    assert result["memory_freed_after_s"] < 30, "the killed actors' memory must come back"
    assert result["default_two_actors"] == {"head": 2, "worker": 0}, (
        "undeclared default actors from a driver on the head still land on it"
    )
