"""PEND-01 … PEND-06's verdicts on records shaped as ``workloads.pending`` reports them (the
numbers and texts of docs/evidence/data/pend.json, 3 December 2026, 2.60.0)."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import MissingEvidence
from experiments.verdicts.pending import (
    Joined,
    Membership,
    StartExit,
    Unreachable,
    Waiting,
    app_errors_fail_fast,
    gpu_with_type,
    infeasible_waits,
    never_joined,
    pip_env_fails_in_time,
    ray_start_gives_up,
    strict_groups_wait,
)

IDS = {"head": "a52bf48f", "gplain": "0ddc98a2", "ga100": "753bfecd", "late": "5b7fc37f"}


def status(*names: str, demands: str = " (no resource demands)") -> str:
    active = "".join(f" 1 node_{IDS[n]}\n" for n in names)
    return (
        "======== Autoscaler status: 2026-12-03 15:18:21.646870 ========\nNode status\n"
        f"---------------------------------------------------------------\nActive:\n{active}"
        "Pending:\n (no pending nodes)\nRecent failures:\n (no failures)\n\nResources\n"
        f" 0.0/6.0 CPU\n 0.0/2.0 GPU\n\nPending Demands:\n{demands}\n"
    )


def node(name: str) -> dict[str, Any]:
    return {"in_ray_nodes": True, "alive": True, "node_id": IDS[name], "in_ray_status": True}


LOST = {"in_ray_nodes": False, "alive": False, "node_id": None, "in_ray_status": False}
JOINED = frozenset({"head", "gplain", "ga100"})
NEVER = frozenset({"lost"})
BEFORE: dict[str, Any] = {
    "nodes": {**{n: node(n) for n in JOINED}, "lost": LOST},
    "cluster_cpu": 6.0,
    "cluster_resources": {"CPU": 6.0, "GPU": 2.0, "A100": 1.0},
    "ray_status": status("head", "gplain", "ga100"),
}
MEMBERS = Membership(BEFORE, JOINED, NEVER, 6)


def test_pend03_a_node_that_never_joined_counts_for_nothing() -> None:
    held = never_joined(MEMBERS)
    assert (held.claim, held.outcome) == ("PEND-03", "held")
    counted = never_joined(replace(MEMBERS, seen={**BEFORE, "cluster_cpu": 7.0}))
    assert counted.outcome == "failed"
    assert "lost's CPU must not be counted" in counted.reason
    listed = deepcopy(BEFORE)
    listed["nodes"]["lost"] = {**LOST, "in_ray_nodes": True}
    assert "lost never joined, yet" in never_joined(replace(MEMBERS, seen=listed)).reason
    extra = {**BEFORE, "ray_status": status("head", "gplain", "ga100", "late")}
    assert (
        "ray status Active must list exactly" in never_joined(replace(MEMBERS, seen=extra)).reason
    )


def test_pend03_a_ray_status_without_its_active_section_cannot_decide() -> None:
    failed = {**BEFORE, "ray_status": "(ray status failed: TimeoutExpired())"}
    unknown = never_joined(replace(MEMBERS, seen=failed))
    assert unknown.outcome == "unknown"
    assert isinstance(unknown.error(), MissingEvidence)
    assert "no Active section" in unknown.reason


def gpu_case(counts: dict[str, int], pending: int = 0) -> dict[str, Any]:
    return {"counts": counts, "pending": pending}


GPU: dict[str, Any] = {
    "gpu+A100 custom": gpu_case({"ga100": 3}),
    "gpu+accelerator_type=A100": gpu_case({"ga100": 3}),
    "gpu only": gpu_case({"ga100": 2, "gplain": 1}),
    "A100 custom only": gpu_case({"ga100": 3}),
    "gpu+H100 custom (nobody)": gpu_case({}, 3),
}


def test_pend04_gpu_and_type_run_only_where_both_are() -> None:
    held = gpu_with_type(GPU, 3)
    assert (held.claim, held.outcome) == ("PEND-04", "held")
    strayed = gpu_with_type({**GPU, "gpu+A100 custom": gpu_case({"ga100": 2, "gplain": 1})}, 3)
    assert strayed.outcome == "failed"
    assert "gpu+A100 custom" in strayed.reason
    ran = gpu_with_type({**GPU, "gpu+H100 custom (nobody)": gpu_case({"ga100": 1}, 2)}, 3)
    assert "gpu+H100 custom (nobody)" in ran.reason
    off = gpu_with_type({**GPU, "gpu only": gpu_case({"head": 3})}, 3)
    assert "on the GPU nodes only" in off.reason


def group(strategy: str, demand: str) -> dict[str, Any]:
    return {
        "ready_after_wait": False,
        "state": "PENDING",
        "state_api": ["PENDING"],
        "pending_demands": [f"{demand} ({strategy}): 1+ pending placement groups"],
        "cpu_before": 6.0,
        "cpu_during": 6.0,
        "cpu_after": 6.0,
        "state_after_remove": "REMOVED",
        "pg_resources_left": [],
    }


GROUPS = {
    "STRICT_SPREAD": group("STRICT_SPREAD", "{'CPU': 1.0} * 4"),
    "STRICT_PACK": group("STRICT_PACK", "{'CPU': 2.0} * 1, {'CPU': 1.0} * 1"),
}


def test_pend02_an_oversized_strict_group_waits_and_its_removal_frees_all() -> None:
    held = strict_groups_wait(GROUPS, 6)
    assert (held.claim, held.outcome) == ("PEND-02", "held")
    placed = {**GROUPS, "STRICT_PACK": {**GROUPS["STRICT_PACK"], "state": "CREATED"}}
    assert "STRICT_PACK: the group must stay PENDING" in strict_groups_wait(placed, 6).reason
    held_cpu = {**GROUPS, "STRICT_SPREAD": {**GROUPS["STRICT_SPREAD"], "cpu_during": 4.0}}
    assert "no partial hold" in strict_groups_wait(held_cpu, 6).reason
    unlisted = {**GROUPS, "STRICT_SPREAD": {**GROUPS["STRICT_SPREAD"], "pending_demands": []}}
    assert "Pending Demands lack (STRICT_SPREAD)" in strict_groups_wait(unlisted, 6).reason
    left = {
        **GROUPS,
        "STRICT_PACK": {**GROUPS["STRICT_PACK"], "pg_resources_left": ["CPU_group_1"]},
    }
    assert "removal must free everything" in strict_groups_wait(left, 6).reason


def waiting(state: str, demand: str, line: str) -> Waiting:
    seen = {"ready_after_wait": False, "states": [state], "pending_demands": [line]}
    return Waiting(state, demand, seen)


WAITING = [
    waiting("PENDING_NODE_ASSIGNMENT", "{'GPU': 2.0}", "{'GPU': 2.0}: 1+ pending tasks/actors"),
    waiting("PENDING_NODE_ASSIGNMENT", "{'CPU': 64.0}", "{'CPU': 64.0}: 1+ pending tasks/actors"),
    waiting("PENDING_CREATION", "'nobody': 1.0", "{'nobody': 1.0}: 1+ pending tasks/actors"),
]
AFTER = {
    **BEFORE,
    "nodes": {**BEFORE["nodes"], "late": node("late")},
    "cluster_cpu": 7.0,
    "cluster_resources": {"CPU": 7.0, "GPU": 2.0, "A100": 1.0, "fancy": 1.0},
    "ray_status": status("head", "gplain", "ga100", "late"),
}
JOIN = Joined(
    {
        "ready_after_wait": False,
        "states": ["PENDING_NODE_ASSIGNMENT"],
        "ran_on": "172.24.0.23",
        "ran_after_join_wait_s": 13.77,
    },
    frozenset({"late", "172.24.0.23"}),
    Membership(AFTER, JOINED | {"late"}, NEVER, 7),
)


def test_pend01_infeasible_work_waits_then_runs_on_the_node_that_joins() -> None:
    held = infeasible_waits(WAITING, JOIN)
    assert (held.claim, held.outcome) == ("PEND-01", "held")
    assert "ran on 172.24.0.23" in held.reason
    raised = replace(WAITING[2], seen={**WAITING[2].seen, "states": ["DEAD"]})
    failed = infeasible_waits([*WAITING[:2], raised], JOIN)
    assert failed.outcome == "failed"
    assert "'nobody': 1.0: expected [PENDING_CREATION]" in failed.reason
    unlisted = replace(WAITING[0], seen={**WAITING[0].seen, "pending_demands": []})
    assert "Pending Demands lack {'GPU': 2.0}" in infeasible_waits([unlisted], JOIN).reason
    never_ran = replace(JOIN, seen={**JOIN.seen, "ran_on": None, "join_error": {"type": "X"}})
    assert "must run on the joined node" in infeasible_waits(WAITING, never_ran).reason
    uncounted = replace(JOIN, after=replace(JOIN.after, seen={**AFTER, "cluster_cpu": 6.0}))
    assert "the joined node's CPU must count" in infeasible_waits(WAITING, uncounted).reason


def test_pend01_a_membership_read_missing_a_node_cannot_decide() -> None:
    short = {**AFTER, "nodes": {k: v for k, v in AFTER["nodes"].items() if k != "late"}}
    unknown = infeasible_waits(WAITING, replace(JOIN, after=replace(JOIN.after, seen=short)))
    assert unknown.outcome == "unknown"
    assert "does not report late" in unknown.reason


def env_failure(seconds: float) -> dict[str, Any]:
    error = {"type": "RuntimeEnvSetupError", "message": "Failed to set up runtime environment."}
    return {"ok": False, "error": error, "seconds": seconds}


INIT_MESSAGE = (
    "The actor died because of an error raised in its creation task, ray::BrokenInit.__init__() "
    '…\n    raise ValueError("init failed on purpose")\nValueError: init failed on purpose'
)
ERRORS: dict[str, Any] = {
    "broken_init": {
        "ok": False,
        "error": {
            "type": "ActorDiedError",
            "bases": ["RayActorError", "RayError", "Exception", "BaseException"],
            "message": INIT_MESSAGE,
        },
        "seconds": 3.67,
        "state_api": [{"state": "DEAD", "node": "late"}],
        "second_call": "ActorDiedError",
    },
    "runtime_env[conda] task": env_failure(2.06),
    "runtime_env[conda] actor": env_failure(0.07),
    "runtime_env[working_dir] task": env_failure(33.25),
    "runtime_env[working_dir] actor": env_failure(33.25),
}
ENVS = ["conda", "working_dir"]


def test_pend06_application_errors_fail_instead_of_pending() -> None:
    held = app_errors_fail_fast(ERRORS, ENVS)
    assert (held.claim, held.outcome) == ("PEND-06", "held")
    pending = {**ERRORS, "runtime_env[working_dir] actor": {"ok": None, "pending_after_s": 60}}
    failed = app_errors_fail_fast(pending, ENVS)
    assert failed.outcome == "failed"
    assert "working_dir actor must fail, not pend" in failed.reason
    alive = deepcopy(ERRORS)
    alive["broken_init"]["state_api"] = [{"state": "PENDING_CREATION"}]
    assert "the actor must be DEAD" in app_errors_fail_fast(alive, ENVS).reason
    answered = {**ERRORS, "broken_init": {"ok": True, "state_api": [], "seconds": 0.1}}
    assert "the raising __init__" in app_errors_fail_fast(answered, ENVS).reason


PIP_MESSAGE = (
    "Failed to set up runtime environment.\n[Node 172.30.0.10] Failed to install runtime_env "
    "within the timeout of 10 seconds. Consider increasing the timeout in the runtime_env config."
)
PIP: dict[str, Any] = {
    "ok": False,
    "error": {"type": "RuntimeEnvSetupError", "message": PIP_MESSAGE},
    "seconds": 26.19,
}


def test_pend06_a_pip_env_fails_within_its_setup_timeout() -> None:
    held = pip_env_fails_in_time(PIP, 62.0, 10)
    assert (held.claim, held.outcome) == ("PEND-06", "held")
    assert {m.name: m.value for m in held.measured} == {"PEND-06 pip task failed after (s)": 26.19}
    late = pip_env_fails_in_time({**PIP, "seconds": 70.0}, 62.0, 10)
    assert late.outcome == "failed"
    assert "failed after 70.0 s, bound 62.0 s" in late.reason
    assert late.measured[0].value == 70.0  # measured though it failed
    pending = pip_env_fails_in_time({"ok": None, "seconds": 62.0}, 62.0, 10)
    assert "must fail within 62.0 s" in pending.reason
    other = {**PIP, "error": {**PIP["error"], "message": "Failed to set up runtime environment."}}
    assert "Failed to set up" in pip_env_fails_in_time(other, 62.0, 10).reason


LOG = (
    "".join(
        "rpc_client.h:153: Failed to connect to GCS at address 172.25.0.20:6379 within 2 seconds.\n"
        "gcs_client.cc:210: Failed to get cluster ID from GCS server: TimedOut\n"
        for _ in range(3)
    )
    + "RuntimeError: Failed to connect to GCS. Last connection error: …\n"
)
TAIL = "RuntimeError: Failed to connect to GCS. Last connection error: Traceback …"
GAVE_UP = Unreachable(
    tries=3,
    least=27.0,
    bound=60.0,
    loopback=StartExit(1, 39, LOG),
    firewall=StartExit(1, 34.61, TAIL),
    ip="172.25.0.20",
    registered=frozenset({"172.25.0.10"}),
    status=status("head"),
)


def test_pend05_ray_start_gives_up_both_ways_and_never_registers() -> None:
    held = ray_start_gives_up(GAVE_UP)
    assert (held.claim, held.outcome) == ("PEND-05", "held")
    assert {m.name: m.value for m in held.measured} == {
        "PEND-05 loopback: ray start ran (s)": 39,
        "PEND-05 firewall: ray start ran (s)": 34.61,
    }
    running = ray_start_gives_up(replace(GAVE_UP, firewall=StartExit(None, 60.0, "")))
    assert running.outcome == "failed"
    assert "behind the firewall still running after 60.0 s" in running.reason
    early = ray_start_gives_up(replace(GAVE_UP, loopback=StartExit(1, 20, LOG)))
    assert "exited after 20 s, expected 27.0-60.0 s" in early.reason
    succeeded = ray_start_gives_up(replace(GAVE_UP, loopback=StartExit(0, 39, LOG)))
    assert "ray start must fail, exited 0" in succeeded.reason
    fewer = ray_start_gives_up(replace(GAVE_UP, tries=20))
    assert "20 GCS tries expected, the log shows 3" in fewer.reason
    joined = ray_start_gives_up(replace(GAVE_UP, registered=frozenset({"172.25.0.20"})))
    assert "lost must never register" in joined.reason
