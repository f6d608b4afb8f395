"""STORE-01 … STORE-03, OOM-01, OOM-02 and ADVICE-01's memory knobs on records shaped as
``workloads.store`` reports them, their numbers from docs/evidence/data/store.json and oom.json
(no Docker): STORE-02's three findings, and Ray's documented outcomes where they would XPASS."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import CheckFailed
from experiments.verdicts.object_store import (
    FallbackAllocatedInsteadOfStoreFull,
    Fill,
    HeadCaps,
    OutOfDiskInsteadOfStoreFull,
    SpilledDespiteEnvKnob,
    caps_only_declared_work,
    full_spill_disk,
    kills_the_worker_not_the_node,
    oom_knobs_take_effect,
    spilled_past_the_store,
    store_full_once_the_fallback_is_full,
    store_full_with_the_env_knob,
    store_full_without_spilling,
)

FILL = Fill(total_mb=300, size_mb=10)
STATS = (
    "Plasma memory usage 90 MiB, 9 objects, 90.0% full, 50.0% needed\nSpilled 250 MiB, 25 objects"
)
#: STORE-01, 2.60.0 (data/store.json, 3 December 2026): 30 puts, all read back, 250 MiB spilled.
SPILLED: dict[str, Any] = {
    "store_mib": 100.0,
    "put_ok": 30,
    "error": None,
    "readable": 30,
    "read_error": None,
    "spilled_mib": 250.0,
    "fallback_mib": None,
    "memory_stats": STATS,
    "system_config": {"automatic_object_spilling_enabled": True},
}
STORE_FULL = {
    "index": 10,
    "type": "ObjectStoreFullError",
    "bases": ["RayError", "Exception"],
    "message": "Failed to put object … in object store because it is full.",
}
LOCAL_DISK_FULL = (
    "Local disk is full\nThe object cannot be created because the local object store is full "
    "and the local disk's utilization is over capacity (95% by default)."
)


def out_of_disk(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "type": "OutOfDiskError",
        "bases": ["RayError", "Exception", "BaseException"],
        "message": LOCAL_DISK_FULL,
    }


def test_store01_spilled_objects_hold_and_a_failed_put_or_no_spill_fails() -> None:
    held = spilled_past_the_store(SPILLED, FILL)
    assert held.held and held.claim == "STORE-01"
    assert "250.0 MiB spilled" in held.reason
    failed = spilled_past_the_store({**SPILLED, "put_ok": 12, "error": out_of_disk(12)}, FILL)
    assert failed.outcome == "failed"
    assert "every put must succeed: 12 of 30" in failed.reason
    unread = spilled_past_the_store({**SPILLED, "readable": None, "read_error": "timeout"}, FILL)
    assert "every object must read back" in unread.reason
    unspilled = spilled_past_the_store({**SPILLED, "spilled_mib": None}, FILL)
    assert "at least 150 MiB spilled" in unspilled.reason


#: STORE-02 with the env knob, 2.60.0 (data/store.json): 30 puts, 250 MiB spilled, the GCS's
#: system config true.
ENV_KNOB = {**SPILLED, "readable": None}


def test_store02_the_env_knob_spilling_anyway_is_the_finding() -> None:
    finding = store_full_with_the_env_knob(ENV_KNOB, FILL)
    assert finding.outcome == "failed" and finding.claim == "STORE-02"
    assert isinstance(finding.error(), SpilledDespiteEnvKnob)
    assert "250.0 MiB spilled" in finding.reason
    assert "automatic_object_spilling_enabled=True" in finding.reason
    full = store_full_with_the_env_knob({**ENV_KNOB, "put_ok": 10, "error": STORE_FULL}, FILL)
    assert full.held  # Ray's documented outcome: the strict xfail would XPASS
    # Spilled with the flag not true in the system config: not this finding, a failure.
    other = store_full_with_the_env_knob({**ENV_KNOB, "system_config": {}}, FILL)
    assert type(other.error()) is CheckFailed
    assert "must raise ObjectStoreFullError" in other.reason


#: STORE-02 with spilling off in the system config, 2.60.0 (data/store.json): 30 puts, all read
#: back, nothing spilled, "Plasma filesystem mmap usage: 210 MiB".
FALLBACK = {
    **SPILLED,
    "spilled_mib": None,
    "fallback_mib": 210.0,
    "system_config": {"automatic_object_spilling_enabled": False},
}


def test_store02_the_fallback_allocation_is_the_finding() -> None:
    finding = store_full_without_spilling(FALLBACK, FILL)
    assert isinstance(finding.error(), FallbackAllocatedInsteadOfStoreFull)
    assert "210.0 MiB in plasma's filesystem fallback" in finding.reason
    full = store_full_without_spilling({**FALLBACK, "put_ok": 10, "error": STORE_FULL}, FILL)
    assert full.held and "ObjectStoreFullError" in full.reason
    # Less in the fallback than the 200 MiB the store cannot hold: not the finding.
    short = store_full_without_spilling({**FALLBACK, "fallback_mib": 150.0}, FILL)
    assert short.outcome == "failed"
    assert type(short.error()) is CheckFailed


#: STORE-02 with a 60 MiB fallback tmpfs and 40 MiB puts, 2.60.0 (data/store.json): three puts,
#: the fourth (index 3) OutOfDiskError, 40 MiB in the fallback.
FALLBACK_FULL = {**FALLBACK, "put_ok": 3, "error": out_of_disk(3), "fallback_mib": 40.0}
FORTIES = Fill(total_mb=200, size_mb=40)


def test_store02_out_of_disk_once_the_fallback_is_full_is_the_finding() -> None:
    finding = store_full_once_the_fallback_is_full(FALLBACK_FULL, FORTIES, 60)
    assert isinstance(finding.error(), OutOfDiskInsteadOfStoreFull)
    assert "put 4 raised OutOfDiskError with 40.0 MiB" in finding.reason
    full = {**FALLBACK_FULL, "error": {**STORE_FULL, "index": 3}}
    assert store_full_once_the_fallback_is_full(full, FORTIES, 60).held
    # OutOfDiskError at another put than the one that fits nowhere: a failure, not the finding.
    early = {**FALLBACK_FULL, "error": out_of_disk(2)}
    assert type(store_full_once_the_fallback_is_full(early, FORTIES, 60).error()) is CheckFailed


#: STORE-03, 2.60.0 (data/store.json, 4 December 2026): OutOfDiskError at put 17, 80 MiB
#: spilled, and the raylet's file-system monitor line.
DISK_FULL = {**SPILLED, "put_ok": 17, "error": out_of_disk(17), "readable": None}
MONITOR = (
    "[2026-12-04 12:35:56,806 E 309 325] (raylet) file_system_monitor.cc:116: /spill is over 95% "
    "full, available space: 0 GB; capacity: 0.0976562 GB. Object creation will fail if spilling "
    "is required.\n"
)


def test_store03_out_of_disk_over_the_threshold_holds() -> None:
    held = full_spill_disk(DISK_FULL, FILL, MONITOR, "/spill")
    assert held.held and held.claim == "STORE-03"
    assert "put 18 raised OutOfDiskError" in held.reason


def test_store03_another_error_or_no_monitor_line_fails() -> None:
    full = full_spill_disk({**DISK_FULL, "error": STORE_FULL}, FILL, MONITOR, "/spill")
    assert full.outcome == "failed" and "expected OutOfDiskError" in full.reason
    late = full_spill_disk({**DISK_FULL, "error": out_of_disk(30)}, FILL, MONITOR, "/spill")
    assert "before all 300 MiB are in" in late.reason
    silent = full_spill_disk(DISK_FULL, FILL, None, "/spill")
    assert silent.outcome == "failed"
    assert "never logged /spill over its threshold" in silent.reason
    other = full_spill_disk(DISK_FULL, FILL, MONITOR.replace("95%", "90%"), "/spill")
    assert "is not local_fs_capacity_threshold" in other.reason


def oom_run() -> dict[str, Any]:
    """OOM-01, 2.60.0 (data/oom.json, 3 December 2026)."""
    failed = {"attempt": 0, "state": "FAILED", "error_type": "OUT_OF_MEMORY"}
    return {
        "cases": [
            {
                "ok": False,
                "error": {"type": "OutOfMemoryError", "bases": ["RayError", "Exception"]},
                "attempts_on_node": 1,
                "state_api": [failed],
            },
            {
                "ok": True,
                "value": {"attempt": 4, "survived_heavy": False},
                "attempts_on_node": 4,
                "state_api": [
                    {**failed, "attempt": 1},
                    {"attempt": 3, "state": "FINISHED", "error_type": None},
                    {**failed, "attempt": 2},
                    failed,
                ],
            },
        ],
        "worker_exit_types": {"None": 1, "NODE_OUT_OF_MEMORY": 4},
        "node_alive": True,
    }


def test_oom01_the_monitor_killing_workers_holds() -> None:
    held = kills_the_worker_not_the_node(oom_run())
    assert held.held and held.claim == "OOM-01"
    assert "4 workers exited NODE_OUT_OF_MEMORY" in held.reason


def test_oom01_a_spent_budget_a_lost_node_or_too_few_kills_fail() -> None:
    budget = oom_run()
    budget["cases"][1] = {"ok": False, "error": {"type": "OutOfMemoryError"}}
    spent = kills_the_worker_not_the_node(budget)
    assert spent.outcome == "failed" and "fourth attempt" in spent.reason
    lost = kills_the_worker_not_the_node({**oom_run(), "node_alive": False})
    assert "the node must survive" in lost.reason
    few = kills_the_worker_not_the_node(
        {**oom_run(), "worker_exit_types": {"NODE_OUT_OF_MEMORY": 3}}
    )
    assert "4 NODE_OUT_OF_MEMORY worker exits" in few.reason
    retried = oom_run()
    retried["cases"][0]["attempts_on_node"] = 2
    assert "max_retries=0: one attempt" in kills_the_worker_not_the_node(retried).reason


#: ADVICE-01's memory knobs, 2.60.0 (data/oom.json, 4 December 2026): the knobbed worker's task
#: killed at 0.77, the control held 0.83.
HELD: dict[str, Any] = {
    "worker": {"ok": False, "error": {"type": "OutOfMemoryError"}},
    "control": {"ok": True, "value": {"reached": 0.83, "lowest_while_held": 0.83}},
}


def test_advice01_the_threshold_knob_takes_effect_only_where_set() -> None:
    held = oom_knobs_take_effect(HELD, 0.82, 0.7)
    assert held.held and held.claim == "ADVICE-01"
    survived = {**HELD, "worker": {"ok": True, "value": {"lowest_while_held": 0.83}}}
    ignored = oom_knobs_take_effect(survived, 0.82, 0.7)
    assert ignored.outcome == "failed" and "must fail with OutOfMemoryError" in ignored.reason
    killed = {**HELD, "control": {"ok": False, "error": {"type": "OutOfMemoryError"}}}
    assert (
        "Ray's default threshold must let 0.82" in oom_knobs_take_effect(killed, 0.82, 0.7).reason
    )
    low = deepcopy(HELD)
    low["control"]["value"]["lowest_while_held"] = 0.65
    assert "proves nothing" in oom_knobs_take_effect(low, 0.82, 0.7).reason


CAPS = HeadCaps(memory_mib=300, store_mib=80, declared_mb=150, actors=3)
#: OOM-02, 2.60.0 (data/oom.json).
HEAD: dict[str, Any] = {
    "head_memory_mib": 300.0,
    "head_object_store_mib": 80.0,
    "per_node_object_store_mib": {"worker": 100.0, "head": 80.0},
    "undeclared_on_head": {"alive": 3, "pending": 0, "nodes": ["head", "head", "head"]},
    "declared_on_head": {
        "alive": 2,
        "pending": 1,
        "expected_fit": 2,
        "states": ["ALIVE", "ALIVE", "PENDING_CREATION"],
        "pending_demands": ["{'headslot': 1.0, 'memory': 157286400.0}: 1+ pending tasks/actors"],
    },
    "memory_freed_after_s": 0.53,
    "default_two_actors": {"head": 2, "worker": 0},
}


def test_oom02_head_memory_caps_only_declared_work() -> None:
    held = caps_only_declared_work(HEAD, CAPS)
    assert held.held and held.claim == "OOM-02"
    assert "2 of 3 declaring 150 MiB (1 pending)" in held.reason
    spread = caps_only_declared_work({**HEAD, "default_two_actors": {"head": 0, "worker": 2}}, CAPS)
    assert spread.outcome == "failed" and "still land on it" in spread.reason
    all_fit = deepcopy(HEAD)
    all_fit["declared_on_head"].update(alive=3, pending=0)
    assert "2 declared actors fit, 1 waits" in caps_only_declared_work(all_fit, CAPS).reason
    uncapped = caps_only_declared_work({**HEAD, "head_object_store_mib": 100.0}, CAPS)
    assert "store 80 MiB" in uncapped.reason
    stuck = caps_only_declared_work({**HEAD, "memory_freed_after_s": 30.0}, CAPS)
    assert "memory must come back" in stuck.reason
    other = caps_only_declared_work(HEAD, replace(CAPS, declared_mb=100))
    assert other.outcome == "failed"  # 3 would fit: the record is of 150 MiB actors
