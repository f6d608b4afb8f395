"""Several tenants on one cluster (docs: namespaces, actor lifetimes, placement groups, object
spilling, Jobs API): TENANT-01 … TENANT-05, ADVICE-03.

Topology T: a 4-CPU head with ``special`` and a 4-CPU worker with ``only_worker``; 100 MiB
object stores. Tenants are separate drivers (each ``cluster.run`` is its own job); the host
coordinates them through their events and signals. Workloads: ``workloads.tenancy``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from chaos.testing import (
    Experiment,
    FaultNotObserved,
    record,
)

HEAD_T = {"num_cpus": 4, "resources": {"special": 1}}
WORKERS_T = [{"name": "worker", "num_cpus": 4, "resources": {"only_worker": 1}}]
#: TENANT-03: how long the retriable in-group task is watched after the group's removal. No
#: Ray timeout ends a pending lease (the raylet cancels a group's queued leases only as it is
#: removed, SCHEDULING_CANCELLED_PLACEMENT_GROUP_REMOVED), so the finding says "not within"
#: this. The documented end, the max_retries=0 task's WorkerCrashedError, was in by the time
#: an outside task had run: 0.6-11.2 s after the removal (8 runs, data/tenant.json).
RETRY_WATCH_S = 60.0
MIB = 2**20


class RetriedTaskOutlivesRemovedGroup(AssertionError):
    """FINDING TENANT-03: removing a placement group kills a retriable task inside it, but the
    task is retried into the removed group, where the retry waits for resources that no longer
    exist: its caller gets no error. Raised only once that symptom is seen in the State API."""


def spilled_mib_of(stats: str) -> float | None:
    """``Spilled N MiB`` from ``ray memory --stats-only`` (None when nothing was spilled)."""
    found = re.search(r"Spilled (\d+) MiB", stats)
    return float(found.group(1)) if found else None


def error_is(outcome: dict[str, Any], name: str) -> bool:
    error = outcome.get("error") or {}
    return name == error.get("type") or name in error.get("bases", [])


@pytest.mark.claim("TENANT-01", "TENANT-02", "TENANT-03")
@pytest.mark.cluster(driver=False, head=HEAD_T, workers=WORKERS_T)
def test_namespaces_driver_exit_and_placement_group_reservation(experiment: Experiment) -> None:
    """Namespaces isolate actor names; a driver's exit kills its actors but not detached ones
    (which hold their CPU until ``ray.kill``); a placement group holds its CPUs from everyone
    else until removed, and removal kills what runs inside it."""
    cluster = experiment.cluster

    # TENANT-01: the same actor name in two namespaces.
    holder = cluster.run(
        "workloads.tenancy:named_actor_hold",
        name="shared",
        namespace="team-a",
        hold_s=180,
        release="release_shared",
    )
    holder.wait_for("created", timeout=120)
    other = cluster.run("workloads.tenancy:named_actor_probe", name="shared", namespace="team-b")
    other_seen = other.result()
    same_seen = cluster.run(
        "workloads.tenancy:named_actor_probe", name="shared", namespace="team-a"
    ).result()
    cluster.signal("release_shared")
    held = holder.result()
    record(experiment, "TENANT-01", {"team-b": other_seen, "team-a": same_seen})
    assert held["namespace"] == "team-a" and held["tag"] == "team-a/A"
    assert not other_seen["get_actor"]["found"], "team-b must not see team-a's actor"
    assert error_is(other_seen["get_actor"], "ValueError"), other_seen
    assert other_seen["create"] == {"ok": True, "tag": "team-b/B"}, other_seen
    assert {"team-a/shared", "team-b/shared"} <= set(
        other_seen["list_named_actors(all_namespaces=True)"]
    )
    assert same_seen["get_actor"] == {"found": True, "tag": "team-a/A"}, same_seen
    assert not same_seen["create"]["ok"], "a second 'shared' in team-a must be refused"
    assert same_seen["create"]["error"]["type"] == "ActorAlreadyExistsError", same_seen
    assert "ValueError" in same_seen["create"]["error"]["bases"]

    # TENANT-02: the first driver exits; the second looks.
    left = cluster.run("workloads.tenancy:leave_actors").result()
    after = cluster.run("workloads.tenancy:after_driver_exit").result()
    record(experiment, "TENANT-02", {"driver 1": left, "driver 2": after})
    assert left["cpu_available"] == left["cpu_total"] - 2 == 6, left
    plain = [s for s in after["states"] if s["name"] == "plain"]
    assert [s["state"] for s in plain] == ["DEAD"], after["states"]
    assert after["plain_lookup"] == "ValueError", "a dead non-detached actor's name is gone"
    assert after["keeper_alive_on"] == left["keeper_node"], "the detached actor lives on"
    assert after["cpu_available_before_kill"] == after["cpu_total"] - 1 == 7, (
        "the detached actor keeps holding its CPU"
    )
    assert after["after_kill"]["available"] == after["after_kill"]["total"] == 8
    keeper = [s for s in after["states_after_kill"] if s["name"] == "keeper"]
    assert [s["state"] for s in keeper] == ["DEAD"], after["states_after_kill"]
    assert "RAY_KILL" in (keeper[0]["death_cause"] or ""), keeper

    # TENANT-03: a placement group holding every CPU.
    pg = cluster.run("workloads.tenancy:pg_reservation", wait_s=6, retriable=False).result()
    record(experiment, "TENANT-03", pg)
    assert pg["cpu_available_with_pg"] == 0 and pg["cpu_total"] == 8, pg
    assert not pg["outside_ran_while_pg"], "work outside the PG must not use its CPUs"
    assert "PENDING_NODE_ASSIGNMENT" in pg["outside_states"], pg["outside_states"]
    assert any("{'CPU': 1.0}" in line for line in pg["pending_demands"]), pg["pending_demands"]
    assert "outside_after_remove_s" in pg, f"the outside task runs after removal: {pg}"
    actor_call = pg["actor_call"]
    assert not actor_call["ok"] and actor_call["error"]["type"] == "ActorDiedError", actor_call
    assert "placement group was removed" in actor_call["error"]["message"]
    task = pg["inside_task max_retries=0"]
    assert not task["ok"] and task["error"]["type"] == "WorkerCrashedError", task
    assert pg["after"]["available"] == pg["after"]["total"] == 8
    assert pg["pg_resources_left"] == []


@pytest.mark.claim("TENANT-03")
@pytest.mark.cluster(driver=False, head={"num_cpus": 4}, workers=[])
@pytest.mark.xfail(
    strict=True,
    raises=RetriedTaskOutlivesRemovedGroup,
    reason="FINDING: (2.60.0 x3, 2.59.0 x1 in docs/evidence/data/tenant.json) "
    "after remove_placement_group a retriable in-group task "
    "(default max_retries=3) is not ended within the 60 s watched: attempt 0 FAILED "
    "WORKER_DIED, attempt 1 waits in PENDING_NODE_ASSIGNMENT for the removed group's bundle "
    "resources, ray.get times out (GetTimeoutError at 60 s) while CPU is back to total and no "
    "_group_ resource is left. The raylet cancels a group's queued leases only when the group "
    "is removed (SCHEDULING_CANCELLED_PLACEMENT_GROUP_REMOVED); the retry is submitted after "
    "that, and a pending lease has no timeout. With max_retries=0 the caller gets "
    "WorkerCrashedError.",
)
def test_retriable_task_in_a_removed_placement_group_is_killed(experiment: Experiment) -> None:
    """Removing a placement group kills a retriable task inside it: the caller gets an error."""
    pg = experiment.cluster.run(
        "workloads.tenancy:pg_reservation",
        wait_s=3,
        retriable=True,
        retriable_wait_s=RETRY_WATCH_S,
        timeout=RETRY_WATCH_S + 300,
    ).result()
    record(experiment, "TENANT-03 retriable task", pg)
    task = pg["inside_task max_retries=0"]
    assert not task["ok"] and task["error"]["type"] == "WorkerCrashedError", task
    outcome = pg["inside_task default retries"]
    experiment.measure("retriable task: watched after removal (s)", outcome["seconds"])
    if outcome["ok"] or outcome["error"]["type"] != "GetTimeoutError":
        assert not outcome["ok"], f"the task must be killed with the group: {outcome}"
        return  # the documented outcome: the caller got the task's error
    # The caller got nothing within the watch: prove it is the finding, not something else.
    attempts = sorted(pg["inside_task_states"]["retriable"], key=lambda r: r["attempt"])
    experiment.measure("retriable task: attempts after the watch", attempts)
    killed = [a for a in attempts[:-1] if a["state"] == "FAILED"]
    # ray.get(timeout=RETRY_WATCH_S) raised GetTimeoutError: its clock starts after the
    # workload's (``seconds`` is measured around the call), so the whole watch was held.
    assert outcome["seconds"] >= RETRY_WATCH_S, outcome
    assert killed and killed[0]["error_type"] == "WORKER_DIED", attempts
    assert attempts and attempts[-1]["state"] == "PENDING_NODE_ASSIGNMENT", attempts
    pending = pg["while_retry_pending"]
    assert pending["pg_resources"] == [], pending
    assert pending["cpu"]["available"] == pending["cpu"]["total"], pending
    raise RetriedTaskOutlivesRemovedGroup(
        f"after remove_placement_group the retriable task's attempt {attempts[-1]['attempt']} "
        f"was still PENDING_NODE_ASSIGNMENT {outcome['seconds']} s later (attempt 0: FAILED "
        f"WORKER_DIED); ray.get raised GetTimeoutError; no _group_ resource was left"
    )


@pytest.mark.claim("TENANT-04", "TENANT-05", "ADVICE-03")
@pytest.mark.cluster(driver=False, head=HEAD_T, workers=WORKERS_T)
def test_store_pressure_and_jobs_api_resources(experiment: Experiment) -> None:
    """One tenant overfilling the shared store spills the other's objects, whose tasks still
    complete; ``entrypoint_*`` place only the entrypoint (PENDING where nothing fits) and do not
    cap the job's tasks; ``max_resources`` is rejected."""
    cluster = experiment.cluster

    # TENANT-04: B keeps reading 30 MiB while A puts 300 MiB into the same 100 MiB store.
    tenant_b = cluster.run(
        "workloads.tenancy:store_tenant_b", n_objs=3, size_mb=10, duration_s=30, timeout=240
    )
    tenant_b.wait_for("b_ready", timeout=120)
    a = cluster.run(
        "workloads.tenancy:store_tenant_a", total_mb=300, size_mb=20, timeout=240
    ).result()
    b = tenant_b.result()
    record(experiment, "TENANT-04 ray memory --stats-only (after A)", a["stats"])
    # Spills attributed by owner: each tenant's driver owns its objects and records whether
    # each was ever spilled; every object's id carries the job that created it.
    spilled = {
        tenant: [o for o in seen["objects"] if o["did_spill"]]
        for tenant, seen in (("A", a), ("B", b))
    }
    spilled_mib = {
        t: round(sum(o["size"] or 0 for o in objs) / MIB, 1) for t, objs in spilled.items()
    }
    owner_bytes = sum(o["size"] or 0 for objs in spilled.values() for o in objs)
    # The raylets' spill count only grows; each tenant read it after taking its own report
    # (A after its reads, B after its report), so the larger reading, the later one, follows
    # both reports.
    readings = [spilled_mib_of(seen["stats"]) for seen in (a, b)]
    store_mib = max((r for r in readings if r is not None), default=None)
    record(
        experiment,
        "TENANT-04",
        {
            "A put": a["put"],
            "A readable": a["readable"],
            "B rounds": b["rounds"],
            "B failures": b["failures"],
            "B slowest round (s)": b["max_round_s"],
            "jobs": {"A": a["job_id"], "B": b["job_id"]},
            "spilled objects by owner": {t: len(objs) for t, objs in spilled.items()},
            "spilled MiB by owner": spilled_mib,
            "store: Spilled MiB (ray memory; A's reading, B's)": readings,
            "B objects": b["objects"],
        },
    )
    experiment.measure("TENANT-04 spilled objects (A, B)", [len(spilled["A"]), len(spilled["B"])])
    assert a["errors"] == [] and a["put"] == a["readable"] == 15, a
    assert b["rounds"] >= 5 and b["failures"] == [], b
    assert a["job_id"] != b["job_id"], "the tenants must be two jobs"
    for seen in (a, b):
        assert {o["job_id"] for o in seen["objects"]} == {seen["job_id"]}, seen["objects"]
    assert spilled["A"], f"A's overflow beyond the 100 MiB store must spill: {a['objects']}"
    # The raylets' own count covers what the owners say was spilled, exactly: a raylet adds
    # each object's size to ``spilled_bytes_total`` as it spills it (local_object_manager.cc,
    # the plasma object's data + metadata), the size the owner records for a put
    # (core_worker.cc, ``AddOwnedObject`` with ``data_size + metadata->Size()``), and ``ray
    # memory`` prints the total in whole MiB, rounded down (``_private/internal_api.py``
    # ``store_stats_summary``). Measured: 290-330 MiB against the owners' 250-290 (4 runs,
    # data/tenant.json; once equal).
    assert all(o["size"] for objs in spilled.values() for o in objs), spilled
    assert store_mib is not None and store_mib >= owner_bytes // MIB, (
        f"the raylets spilled {store_mib} MiB (readings {readings}); the owners report "
        f"{owner_bytes} bytes spilled ({spilled_mib} MiB)"
    )
    # The fault is A's pressure on B: proven only when some of B's objects left memory (B's
    # puts are primary copies, so Ray spills them; it never evicts them). Otherwise nothing was
    # judged: inconclusive, not passed. B's reads then show its tasks still finish.
    if not spilled["B"]:
        raise FaultNotObserved(
            f"none of tenant B's objects was spilled while A put {a['put']} objects into the "
            f"shared store (spilled by owner: {spilled_mib}): the pressure never reached B",
            hint="give A more to put (total_mb) or B a longer read loop",
        )

    # TENANT-05 / ADVICE-03: the Jobs API.
    jobs = cluster.run("workloads.tenancy:jobs_api", pending_s=10, timeout=500).result()
    record(experiment, "TENANT-05", jobs)
    capped = jobs["entrypoint_resources special + entrypoint_num_cpus=1"]
    assert capped["status"] == "SUCCEEDED" and capped["entry_node"] == "head", capped
    assert capped["peak_concurrency"] > 1, "entrypoint_num_cpus must not cap the job's tasks"
    on_worker = jobs["entrypoint_resources only_worker"]
    assert on_worker["status"] == "SUCCEEDED" and on_worker["entry_node"] == "worker", on_worker
    nowhere = jobs["entrypoint_resources nobody_has_this"]
    assert nowhere["status"] == "PENDING", nowhere
    assert "waiting for resources" in nowhere["message"], nowhere
    assert any("nobody_has_this" in line for line in nowhere["pending_demands"]), nowhere
    quota = jobs["max_resources"]
    assert not quota["accepted"] and quota["error"]["type"] == "TypeError", quota
    assert "max_resources" in quota["error"]["message"]
