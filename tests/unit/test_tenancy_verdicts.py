"""TENANT-01 … TENANT-05 and ADVICE-03's verdicts (as the tenancy experiments judge them) on
records shaped as ``workloads.tenancy`` reports them (numbers from docs/evidence/data/tenant.json)."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from chaos.testing import CheckFailed
from experiments.verdicts.tenancy import (
    MIB,
    RetriedTaskOutlivesRemovedGroup,
    StoreRun,
    driver_exit_spares_detached,
    entrypoints_placed_not_capped,
    group_reserves_until_removed,
    jobs_api_refuses_a_quota,
    namespaces_isolate_names,
    removal_ends_retriable_task,
    spilled_mib_of,
    tenants_share_the_store,
)

HELD = {"namespace": "team-a", "tag": "team-a/A"}
LOOKUP_FAILED = {"type": "ValueError", "bases": ["Exception", "BaseException"]}
TEAM_B: dict[str, Any] = {
    "get_actor": {"found": False, "error": LOOKUP_FAILED},
    "create": {"ok": True, "tag": "team-b/B"},
    "list_named_actors(all_namespaces=True)": ["team-a/shared", "team-b/shared"],
}
TAKEN = {"type": "ActorAlreadyExistsError", "bases": ["ValueError", "RayError", "Exception"]}
TEAM_A: dict[str, Any] = {
    "get_actor": {"found": True, "tag": "team-a/A"},
    "create": {"ok": False, "error": TAKEN},
}


def test_tenant01_names_are_per_namespace() -> None:
    held = namespaces_isolate_names(HELD, TEAM_B, TEAM_A)
    assert held.held and held.claim == "TENANT-01", held.reason
    leaked = {**TEAM_B, "get_actor": {"found": True, "tag": "team-a/A"}}
    seen = namespaces_isolate_names(HELD, leaked, TEAM_A)
    assert seen.outcome == "failed"
    assert "team-b must not see" in seen.reason
    twice = namespaces_isolate_names(HELD, TEAM_B, {**TEAM_A, "create": {"ok": True}})
    assert "must be refused" in twice.reason


def keeper_row(state: str, reason: str | None) -> dict[str, Any]:
    cause = None if reason is None else f"{{'actor_died_error_context': {{'reason': '{reason}'}}}}"
    return {"state": state, "node": "head", "name": "keeper", "death_cause": cause}


PLAIN_DEAD = {"state": "DEAD", "node": "head", "name": "plain", "death_cause": "OUT_OF_SCOPE"}
LEFT = {"plain_node": "head", "keeper_node": "head", "cpu_available": 6.0, "cpu_total": 8.0}
AFTER: dict[str, Any] = {
    "states": [keeper_row("ALIVE", None), PLAIN_DEAD],
    "cpu_available_before_kill": 7.0,
    "cpu_total": 8.0,
    "keeper_alive_on": "head",
    "plain_lookup": "ValueError",
    "after_kill": {"available": 8.0, "total": 8.0, "waited_s": 0.52},
    "states_after_kill": [keeper_row("DEAD", "RAY_KILL"), PLAIN_DEAD],
}


def test_tenant02_a_driver_exit_spares_the_detached_actor_until_ray_kill() -> None:
    held = driver_exit_spares_detached(LEFT, AFTER)
    assert held.held and held.claim == "TENANT-02", held.reason
    freed = driver_exit_spares_detached(LEFT, {**AFTER, "cpu_available_before_kill": 8.0})
    assert freed.outcome == "failed"
    assert "keeps holding its CPU" in freed.reason
    survived = {**AFTER, "states": [keeper_row("ALIVE", None), {**PLAIN_DEAD, "state": "ALIVE"}]}
    assert "plain actor must be DEAD" in driver_exit_spares_detached(LEFT, survived).reason


CRASHED = {"ok": False, "error": {"type": "WorkerCrashedError", "bases": ["RayError"]}}
REMOVED = (
    "The actor is dead because its worker process has died. Worker exit type: "
    "INTENDED_SYSTEM_EXIT Worker exit detail: Destroying worker since its placement group was "
    "removed."
)
PG: dict[str, Any] = {
    "cpu_total": 8.0,
    "cpu_available_with_pg": 0,
    "outside_ran_while_pg": False,
    "outside_states": ["RUNNING", "PENDING_NODE_ASSIGNMENT"],
    "pending_demands": ["{'CPU': 1.0}: 1+ pending tasks/actors"],
    "outside_after_remove_s": 2.35,
    "actor_call": {"ok": False, "error": {"type": "ActorDiedError", "message": REMOVED}},
    "inside_task max_retries=0": CRASHED,
    "after": {"available": 8.0, "total": 8.0, "waited_s": 0.01},
    "pg_resources_left": [],
}


def test_tenant03_a_group_reserves_its_cpus_until_removed() -> None:
    held = group_reserves_until_removed(PG)
    assert held.held and held.claim == "TENANT-03", held.reason
    shared = group_reserves_until_removed({**PG, "outside_ran_while_pg": True})
    assert shared.outcome == "failed"
    assert "outside the PG" in shared.reason
    survived = group_reserves_until_removed({**PG, "inside_task max_retries=0": {"ok": True}})
    assert "WorkerCrashedError" in survived.reason
    assert "_group_" in group_reserves_until_removed({**PG, "pg_resources_left": ["x"]}).reason


TIMED_OUT = {"ok": False, "error": {"type": "GetTimeoutError"}, "seconds": 62.48}
RETRIABLE: dict[str, Any] = {
    **PG,
    "inside_task default retries": TIMED_OUT,
    "inside_task_states": {
        "retriable": [
            {"state": "PENDING_NODE_ASSIGNMENT", "attempt": 1, "error_type": None},
            {"state": "FAILED", "attempt": 0, "error_type": "WORKER_DIED"},
        ]
    },
    "while_retry_pending": {"cpu": {"available": 4.0, "total": 4.0}, "pg_resources": []},
}


def test_tenant03_a_retry_pending_in_the_removed_group_is_the_finding() -> None:
    found = removal_ends_retriable_task(RETRIABLE)
    assert found.outcome == "failed" and found.claim == "TENANT-03"
    assert isinstance(found.error(), RetriedTaskOutlivesRemovedGroup)
    assert "attempt 1 was still PENDING_NODE_ASSIGNMENT 62.48 s later" in found.reason
    names = [m.name for m in found.measured]
    assert names == [
        "retriable task: watched after removal (s)",
        "retriable task: attempts after the watch",
    ]


def test_tenant03_the_callers_error_holds_and_an_unexplained_silence_fails() -> None:
    killed = {**RETRIABLE, "inside_task default retries": {**CRASHED, "seconds": 0.4}}
    assert removal_ends_retriable_task(killed).held  # would XPASS the strict xfail
    returned = {**RETRIABLE, "inside_task default retries": {"ok": True, "seconds": 3.0}}
    assert "must be killed with the group" in removal_ends_retriable_task(returned).reason
    short = {**RETRIABLE, "inside_task default retries": {**TIMED_OUT, "seconds": 30.0}}
    cut = removal_ends_retriable_task(short)
    assert type(cut.error()) is CheckFailed
    assert "the watch must last" in cut.reason
    held_cpu = deepcopy(RETRIABLE)
    held_cpu["while_retry_pending"]["cpu"]["available"] = 0.0
    assert type(removal_ends_retriable_task(held_cpu).error()) is CheckFailed


def objects(job: str, sizes: list[int], spilled: int) -> list[dict[str, Any]]:
    return [{"job_id": job, "size": size, "did_spill": i < spilled} for i, size in enumerate(sizes)]


STATS = "Plasma memory usage 90 MiB, 5 objects, 45.0% full\nSpilled {} MiB, 18 objects\n"
TENANT_A: dict[str, Any] = {
    "job_id": "03000000",
    "put": 15,
    "readable": 15,
    "errors": [],
    "objects": objects("03000000", [20 * MIB + 3] * 15, 11),
    "stats": STATS.format(330),
}
TENANT_B: dict[str, Any] = {
    "job_id": "02000000",
    "rounds": 29,
    "failures": [],
    "max_round_s": 0.271,
    "objects": objects("02000000", [10 * MIB + 3] * 3, 3),
    "stats": STATS.format(330),
}


def test_tenant04_the_other_tenant_keeps_reading_through_the_spills() -> None:
    store = StoreRun(TENANT_A, TENANT_B)
    assert store.spilled_mib() == {"A": 220.0, "B": 30.0}
    held = tenants_share_the_store(store)
    assert held.held and held.claim == "TENANT-04", held.reason
    assert "330.0 MiB" in held.reason
    failed = tenants_share_the_store(StoreRun(TENANT_A, {**TENANT_B, "failures": [{"round": 3}]}))
    assert failed.outcome == "failed"
    assert "without a failure" in failed.reason


def test_tenant04_the_raylets_count_must_cover_the_owners() -> None:
    under = StoreRun({**TENANT_A, "stats": STATS.format(200)}, {**TENANT_B, "stats": ""})
    assert under.readings() == [200.0, None]
    short = tenants_share_the_store(under)
    assert short.outcome == "failed"
    assert "the raylets spilled 200.0 MiB" in short.reason
    uncounted = StoreRun({**TENANT_A, "stats": ""}, {**TENANT_B, "stats": ""})
    assert "the raylets spilled None MiB" in tenants_share_the_store(uncounted).reason
    assert spilled_mib_of("Plasma memory usage 90 MiB") is None
    unspilled = {**TENANT_A, "objects": objects("03000000", [20 * MIB] * 15, 0)}
    assert "must spill" in tenants_share_the_store(StoreRun(unspilled, TENANT_B)).reason


PENDING_MESSAGE = (
    "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom "
    "resources) to become available."
)
JOBS: dict[str, Any] = {
    "entrypoint_resources special + entrypoint_num_cpus=1": {
        "status": "SUCCEEDED",
        "entry_node": "head",
        "peak_concurrency": 6,
    },
    "entrypoint_resources only_worker": {
        "status": "SUCCEEDED",
        "entry_node": "worker",
        "peak_concurrency": 6,
    },
    "entrypoint_resources nobody_has_this": {
        "status": "PENDING",
        "message": PENDING_MESSAGE,
        "pending_demands": ["{'nobody_has_this': 1.0}: 1+ pending tasks/actors"],
    },
    "max_resources": {
        "accepted": False,
        "error": {
            "type": "TypeError",
            "message": "JobSubmissionClient.submit_job() got an unexpected keyword argument "
            "'max_resources'",
        },
    },
}


def test_tenant05_entrypoint_resources_place_the_entrypoint_only() -> None:
    held = entrypoints_placed_not_capped(JOBS)
    assert held.held and held.claim == "TENANT-05", held.reason
    capped = deepcopy(JOBS)
    capped["entrypoint_resources special + entrypoint_num_cpus=1"]["peak_concurrency"] = 1
    assert "must not cap" in entrypoints_placed_not_capped(capped).reason
    ran = deepcopy(JOBS)
    ran["entrypoint_resources nobody_has_this"]["status"] = "RUNNING"
    assert entrypoints_placed_not_capped(ran).outcome == "failed"


def test_advice03_the_jobs_api_has_no_quota() -> None:
    held = jobs_api_refuses_a_quota(JOBS["max_resources"])
    assert held.held and held.claim == "ADVICE-03", held.reason
    accepted = jobs_api_refuses_a_quota({"accepted": True, "error": None})
    assert accepted.outcome == "failed"
    assert "must raise TypeError" in accepted.reason
