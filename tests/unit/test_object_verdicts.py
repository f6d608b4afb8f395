"""OBJ-01 … OBJ-06's verdicts on records shaped as ``workloads.objects`` reports them (no
Docker): numbers from docs/evidence/node-level.md (2.60.0, 2.50.1)."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

import pytest

from chaos.testing import (
    LINEAGE_EVICTED,
    MAX_ATTEMPTS_EXCEEDED,
    RETRIES_DISABLED,
    Band,
    ChaosError,
    CheckFailed,
)
from experiments.verdicts.objects import (
    LineageOverEvicted,
    Lost,
    OwnerKill,
    TwoLosses,
    evicted_lineage_is_unrecoverable,
    evicts_down_to_half_the_budget,
    lost_after_its_budget,
    lost_without_retries,
    owner_death_is_final,
    reconstructed_once,
    rule_evictions,
    secondary_copy_survives,
)

T0 = 1_796_800_000.0
MB = 1024 * 1024
#: node_death_band(FAST_HEALTH_CHECKS): the read bound is its high + AFTER_DEATH_S (48 s).
BAND = Band(2.0, 18.0, "period 1 s, timeout 3 s, threshold 3")
RECONSTRUCTED = "ObjectReconstructionFailedError"
BASES = ["ObjectLostError", "RayError", "Exception"]
FINISHED = {"state": "FINISHED", "error_type": None}


def lost_error(reason: str | None, error: str = RECONSTRUCTED) -> dict[str, Any]:
    bases = BASES if error != "ObjectLostError" else BASES[1:]
    return {"type": error, "bases": bases, "reason": reason}


# OBJ-01 (2.60.0): re-executed on worker-2, both reads back 6.63 s after the kill.
REBUILT: dict[str, Any] = {
    "task_error": None,
    "task_value": {"nbytes": 4 * MB},
    "driver_error": None,
    "driver_value": {"nbytes": 4 * MB},
    "executions": 2,
    "execution_nodes": ["worker-1", "worker-2"],
    "attempts": [FINISHED, FINISHED],
    "t_driver_outcome": T0 + 6.63,
}


def test_obj01_one_re_execution_elsewhere_read_back_holds() -> None:
    held = reconstructed_once(REBUILT, T0, "worker-1", BAND)
    assert (held.outcome, held.claim) == ("held", "OBJ-01")
    assert "re-executed once on worker-2, read back 6.63 s" in held.reason
    assert [(m.name, m.value) for m in held.measured] == [
        ("OBJ-01 kill → reconstructed read (s)", 6.63)
    ]


def test_obj01_a_read_that_fails_an_extra_re_execution_or_a_late_read_fails() -> None:
    failed_read = {**REBUILT, "driver_error": {"type": "ObjectLostError"}}
    unread = reconstructed_once(failed_read, T0, "worker-1", BAND)
    assert unread.outcome == "failed"
    assert "the driver must read the object" in unread.reason
    twice = {**REBUILT, "executions": 3, "execution_nodes": ["worker-1", "worker-2", "worker-3"]}
    assert "exactly one re-execution" in reconstructed_once(twice, T0, "worker-1", BAND).reason
    same_node = {**REBUILT, "execution_nodes": ["worker-1", "worker-1"]}
    assert "re-executed elsewhere" in reconstructed_once(same_node, T0, "worker-1", BAND).reason
    late = reconstructed_once({**REBUILT, "t_driver_outcome": T0 + 50.0}, T0, "worker-1", BAND)
    assert (late.outcome, late.claim) == ("failed", "OBJ-01")
    assert "read came 50.0 s after the kill, bound 48.0 s" in late.reason
    assert late.measured[0].value == 50.0  # a failed verdict's number still reaches the report


# OBJ-02 (2.60.0): the driver's read fails 7.86 s after the kill; one execution.
NO_RETRIES = Lost(RECONSTRUCTED, RETRIES_DISABLED)
UNRECOVERABLE: dict[str, Any] = {
    "driver_error": lost_error(RETRIES_DISABLED),
    "task_error": {
        "type": f"RayTaskError({RECONSTRUCTED})",
        "is_RayTaskError": True,
        "cause": lost_error(RETRIES_DISABLED),
    },
    "executions": 1,
    "t_driver_outcome": T0 + 7.86,
}


def test_obj02_retries_disabled_holds_on_both_sides_of_the_reason_field() -> None:
    held = lost_without_retries(UNRECOVERABLE, T0, BAND, NO_RETRIES)
    assert (held.outcome, held.claim) == ("held", "OBJ-02")
    assert "7.86 s after the kill, not re-executed" in held.reason
    # 2.50.1: a plain ObjectLostError without .reason (expectation lost_retries_disabled_error).
    old = deepcopy(UNRECOVERABLE)
    old["driver_error"] = old["task_error"]["cause"] = lost_error(None, "ObjectLostError")
    old["task_error"]["type"] = "RayTaskError(ObjectLostError)"
    assert lost_without_retries(old, T0, BAND, Lost("ObjectLostError", None)).held


def test_obj02_a_read_back_a_missing_reason_or_a_reconstruction_fails() -> None:
    read = lost_without_retries({**UNRECOVERABLE, "driver_error": None}, T0, BAND, NO_RETRIES)
    assert read.outcome == "failed"
    assert "the driver's read: the read must fail" in read.reason
    reasonless = {**UNRECOVERABLE, "driver_error": lost_error(None)}
    unnamed = lost_without_retries(reasonless, T0, BAND, NO_RETRIES)
    assert f".reason {RETRIES_DISABLED}, got None" in unnamed.reason
    rerun = lost_without_retries({**UNRECOVERABLE, "executions": 2}, T0, BAND, NO_RETRIES)
    assert "no reconstruction" in rerun.reason
    served = lost_without_retries({**UNRECOVERABLE, "task_error": None}, T0, BAND, NO_RETRIES)
    assert (served.claim, served.outcome) == ("OBJ-02", "failed")
    assert "the dependent task must fail" in served.reason


# OBJ-03 (2.60.0): kills at 0 and 7.54 s, the read failed 23.74 s after the first.
BUDGET_SPENT: dict[str, Any] = {
    "driver_error": lost_error(MAX_ATTEMPTS_EXCEEDED),
    "executions": 2,
    "execution_nodes": ["worker-1", "worker-2"],
    "t_driver_outcome": T0 + 23.74,
}
TWICE = TwoLosses(BUDGET_SPENT, T0, T0 + 7.54, "worker-1", "worker-2", T0 + 7.2)
SPENT = Lost(RECONSTRUCTED, MAX_ATTEMPTS_EXCEEDED)


def test_obj03_the_second_loss_after_the_budget_is_final() -> None:
    held = lost_after_its_budget(TWICE, BAND, SPENT)
    assert (held.outcome, held.claim) == ("held", "OBJ-03")
    measured = {m.name: m.value for m in held.measured}
    assert measured == {
        "OBJ-03 1st kill → re-executed (s)": 7.2,
        "OBJ-03 2nd kill → read fails (s)": 16.2,
    }


def test_obj03_a_third_execution_or_a_reconstruction_in_place_fails() -> None:
    third = replace(TWICE, seen={**BUDGET_SPENT, "executions": 3})
    assert "the budget is spent: 3 executions" in lost_after_its_budget(third, BAND, SPENT).reason
    nowhere = lost_after_its_budget(replace(TWICE, reconstructed_on=None), BAND, SPENT)
    assert nowhere.outcome == "failed"
    assert "reconstructed elsewhere than worker-1" in nowhere.reason
    recovered = replace(TWICE, seen={**BUDGET_SPENT, "driver_error": None})
    assert "the read must fail" in lost_after_its_budget(recovered, BAND, SPENT).reason
    # The bound: the band's high, the workload's 10 s eager-re-execution wait, a worker's start.
    late = replace(TWICE, seen={**BUDGET_SPENT, "t_driver_outcome": T0 + 7.54 + 60.0})
    assert "bound 58.0 s" in lost_after_its_budget(late, BAND, SPENT).reason


def test_obj03_an_unreported_time_fails() -> None:
    untimed = lost_after_its_budget(replace(TWICE, reconstructed_at=None), BAND, SPENT)
    assert untimed.outcome == "failed"
    assert "did not report the time of the re-executed object" in untimed.reason


# OBJ-05 (2.60.0): the task on worker-1 failed 2.8 s, the driver's read 3.93 s after the kill.
OWNER_GONE: dict[str, Any] = {
    "driver_error": {
        "type": "OwnerDiedError",
        "bases": ["ObjectLostError", "RayError", "Exception"],
        "message": "… Owner worker ID: 1f…, owner node ID: n2, owner address: 10.0.0.4 … the "
        "logs of the owner at IP address 10.0.0.4 …",
    },
    "task_error": {"type": "RayTaskError(OwnerDiedError)"},
    "t_task_outcome": T0 + 2.8,
    "t_driver_outcome": T0 + 3.93,
}
KILLED = OwnerKill(OWNER_GONE, T0, "owner node ID: n2", (0.0, 30.0), slow=False)


def test_obj05_owner_died_error_for_both_borrowers_holds() -> None:
    held = owner_death_is_final(KILLED)
    assert (held.outcome, held.claim) == ("held", "OBJ-05")
    task = held.measured[0]
    assert task.name == "OBJ-05 owner kill → task's RayTaskError(OwnerDiedError) (s)"
    assert (task.value, task.band, task.start) == (2.8, (0.0, 30.0), None)
    # 2.50.1: the task's read 60.4 s, the driver's 120.4 s after the kill (the raylet's 60 s
    # wait, twice).
    slow = deepcopy(OWNER_GONE)
    slow.update(t_task_outcome=T0 + 60.4, t_driver_outcome=T0 + 120.4)
    slow["driver_error"]["message"] = "… check the logs of the owner at IP address 10.0.0.4 …"
    old = OwnerKill(slow, T0, "at IP address 10.0.0.4", (60.0, 91.0), slow=True)
    assert owner_death_is_final(old).held
    assert "bound 30.0 s" in owner_death_is_final(replace(old, slow=False)).reason


def test_obj05_a_served_read_an_early_failure_or_an_unnamed_owner_fails() -> None:
    served = owner_death_is_final(replace(KILLED, seen={**OWNER_GONE, "task_error": None}))
    assert served.outcome == "failed"
    assert "must raise RayTaskError(OwnerDiedError)" in served.reason
    early = owner_death_is_final(replace(KILLED, window=(60.0, 91.0)))
    assert "task failed 2.8 s after the owner died, window [60.0, 91.0] s" in early.reason
    unnamed = owner_death_is_final(replace(KILLED, location="owner node ID: n9"))
    assert "must name the owner's node" in unnamed.reason
    hung = owner_death_is_final(replace(KILLED, seen={**OWNER_GONE, "t_driver_outcome": T0 + 45}))
    assert "OwnerDiedError 45.0 s after the owner died, bound 30.0 s" in hung.reason


# OBJ-04 (2.60.0): the owner listed [driver, worker-1] before the kill; read 6.7 s after it.
COPY_LOST: dict[str, Any] = {
    "locations_before": ["driver-node", "w1"],
    "locations_after": ["driver-node", "w2"],
    "task_error": None,
    "task_value": {"nbytes": 4 * MB},
    "driver_error": None,
    "driver_value": {"nbytes": 4 * MB},
    "t_driver_outcome": T0 + 6.7,
}


def test_obj04_a_secondary_copys_node_death_loses_nothing() -> None:
    held = secondary_copy_survives(COPY_LOST, T0, BAND)
    assert (held.outcome, held.claim) == ("held", "OBJ-04")
    assert [m.name for m in held.measured] == [
        "OBJ-04 copies listed by the owner before the kill",
        "OBJ-04 copies listed by the owner after the read",
        "OBJ-04 kill → read (s)",
    ]
    failed_read = {**COPY_LOST, "task_error": {"type": "ObjectLostError"}}
    lost = secondary_copy_survives(failed_read, T0, BAND)
    assert lost.outcome == "failed"
    assert "the dependent task must read the object" in lost.reason
    late = secondary_copy_survives({**COPY_LOST, "t_driver_outcome": T0 + 49.0}, T0, BAND)
    assert "read came 49.0 s after the kill, bound 48.0 s" in late.reason


# OBJ-06 (2.60.0): seven 21 539 B specs, budget 100 000 B; the fifth completion overran it
# (107 695 B, "Evicted -0.107695MB") and producers 0-4 all lost their lineage.
BUDGET = 100_000
EVICTED = Lost(RECONSTRUCTED, LINEAGE_EVICTED)


def lineage(evicted: int, count: int = 7, total: int = 107_695) -> dict[str, Any]:
    objects = [
        {"index": i, "error": lost_error(LINEAGE_EVICTED), "executions": 1}
        if i < evicted
        else {"index": i, "error": None, "executions": 2}
        for i in range(count)
    ]
    return {
        "objects": objects,
        "lineage_log": {"exceeded": [{"total": total, "limit": BUDGET}], "evicted": [-total]},
        "overruns_after_completion": [0, 0, 0, 0, 1, 1, 1][:count],
        "pad_bytes": 20_480,
    }


def test_ray_rule_evicts_the_three_oldest() -> None:
    assert rule_evictions(7, 21_539, BUDGET) == [0, 1, 2]


def test_obj06_evicted_lineage_is_unrecoverable_even_when_over_evicted() -> None:
    held = evicted_lineage_is_unrecoverable(lineage(5), BUDGET, EVICTED)
    assert (held.outcome, held.claim) == ("held", "OBJ-06")
    measured = {m.name: m.value for m in held.measured}
    assert measured["OBJ-06 task spec footprint (B)"] == 21_539
    assert measured["OBJ-06 overruns after completion"] == [4]
    assert measured["OBJ-06 lineage evicted (producers)"] == [0, 1, 2, 3, 4]
    assert measured["OBJ-06 Ray's rule evicts (producers)"] == [0, 1, 2]
    assert evicted_lineage_is_unrecoverable(lineage(3), BUDGET, EVICTED).held  # the rule's 3
    # 2.50.1: the LineageEvicted subclass, without .reason.
    old = lineage(5)
    for row in old["objects"][:5]:
        row["error"] = lost_error(None, "ObjectReconstructionFailedLineageEvictedError")
    assert evicted_lineage_is_unrecoverable(
        old, BUDGET, Lost("ObjectReconstructionFailedLineageEvictedError", None)
    ).held


def test_obj06_too_little_the_wrong_order_or_a_re_run_fails() -> None:
    under = evicted_lineage_is_unrecoverable(lineage(2), BUDGET, EVICTED)
    assert under.outcome == "failed"
    assert "Ray's rule evicts [0, 1, 2], evicted [0, 1]" in under.reason
    kept_all = evicted_lineage_is_unrecoverable(lineage(0), BUDGET, EVICTED)
    assert "an overrun must cost some object its lineage" in kept_all.reason
    shuffled = lineage(4)
    shuffled["objects"][0] = {"index": 0, "error": None, "executions": 2}
    assert (
        "the oldest go first: [1, 2, 3]"
        in evicted_lineage_is_unrecoverable(shuffled, BUDGET, EVICTED).reason
    )
    rerun = lineage(5)
    rerun["objects"][1]["executions"] = 2
    assert (
        "object 1 was re-executed"
        in evicted_lineage_is_unrecoverable(rerun, BUDGET, EVICTED).reason
    )


def test_obj06_an_overrun_ray_missed_or_misplaced_fails() -> None:
    silent = lineage(5)
    silent["lineage_log"]["exceeded"] = []
    assert "no overrun logged" in evicted_lineage_is_unrecoverable(silent, BUDGET, EVICTED).reason
    misplaced = evicted_lineage_is_unrecoverable(lineage(5, total=150_000), BUDGET, EVICTED)
    assert misplaced.outcome == "failed"
    assert "the first overrun after 5 specs of 30000 B" in misplaced.reason


def test_obj06_a_footprint_smaller_than_its_pad_is_the_harnesss_error() -> None:
    misread = {**lineage(5), "pad_bytes": 30_000}
    with pytest.raises(ChaosError, match="cannot hold its 30000 B pad"):
        evicted_lineage_is_unrecoverable(misread, BUDGET, EVICTED)


def test_obj06_over_eviction_is_the_finding_and_only_over_eviction() -> None:
    finding = evicts_down_to_half_the_budget(lineage(5), BUDGET, EVICTED)
    assert (finding.outcome, finding.claim) == ("failed", "OBJ-06")
    assert isinstance(finding.error(), LineageOverEvicted)
    assert "21539 B specs, 100000 B budget, overruns after completions [4]" in finding.reason
    assert "owner logged evicted bytes [-107695]" in finding.reason
    exact = evicts_down_to_half_the_budget(lineage(3), BUDGET, EVICTED)
    assert exact.held  # would XPASS the strict xfail: the finding no longer reproduces
    under = evicts_down_to_half_the_budget(lineage(2), BUDGET, EVICTED)
    assert type(under.error()) is CheckFailed
    assert "lineage evicted for producers [0, 1], Ray's rule evicts [0, 1, 2]" in under.reason
