"""ACTOR-01 … ACTOR-05's verdicts on records shaped as ``workloads.actors`` reports them."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import replace
from typing import Any

from chaos.testing import Band
from experiments.verdicts.actors import (
    LostOutput,
    Struck,
    calls_during_restart,
    dies_with_owner,
    dies_without_restarts,
    output_reconstructed,
    restarts_once,
)

T0 = 1_796_800_000.0
BAND = Band(3.0, 6.5, "FAST_HEALTH_CHECKS")
DIED = {"type": "ActorDiedError", "bases": ["RayActorError", "RayError", "Exception"]}


def dead_row(cause: str, restarts: int = 0, **info: Any) -> dict[str, Any]:
    context = {"reason": cause, **info}
    return {
        "state": "DEAD",
        "num_restarts": restarts,
        "death_cause": {"actor_died_error_context": context},
    }


PROCESS = Struck(
    {"errors": [DIED], "t_final": T0 + 0.3, "state_api": dead_row("WORKER_DIED")},
    T0,
    [("ALIVE", 0), ("DEAD", 0)],
)
NODE = Struck(
    {
        "errors": [{"type": "GetTimeoutError", "bases": []}, DIED],
        "t_final": T0 + 4.4,
        "state_api": dead_row("NODE_DIED", node_death_info={"reason": "UNEXPECTED_TERMINATION"}),
    },
    T0,
)


def test_an_actor_without_restarts_dies_once_and_a_restart_fails_actor01() -> None:
    assert dies_without_restarts(PROCESS, NODE, BAND, "ActorDiedError").held
    restarted = replace(PROCESS, seen={**PROCESS.seen, "state_api": dead_row("WORKER_DIED", 1)})
    verdict = dies_without_restarts(restarted, NODE, BAND, "ActorDiedError")
    assert verdict.outcome == "failed"
    assert "DEAD with 0 restarts" in verdict.reason
    late = replace(NODE, seen={**NODE.seen, "t_final": T0 + 12.0})
    assert (
        "outside [3.0 s, 6.5 s]"
        in dies_without_restarts(PROCESS, late, BAND, "ActorDiedError").reason
    )


def restarts(node_after: str, cause: str) -> Struck:
    first = {
        "restarted": True, "state_reset": True, "node_name": "worker-1", "pid": 116,
        "after_node_name": node_after, "after": {"pid": 120}, "errors_during": ["ActorUnavailableError"],
        "restart_s": 1.6, "t_alive": T0 - 1,
    }  # fmt: skip
    last = {"restarted": False, "final_errors": [DIED]}
    transitions = [
        {"state": "ALIVE", "num_restarts": 0},
        {"state": "RESTARTING", "num_restarts": 1},
        {"state": "ALIVE", "num_restarts": 1},
        {"state": "DEAD", "num_restarts": 1},
    ]
    seen = {
        "rounds": [first, last],
        "state_api": dead_row(cause, 1),
        "state_transitions": transitions,
    }
    return Struck(seen, T0, [("ALIVE", 0), ("ALIVE", 1), ("DEAD", 1)])


def test_one_restart_with_fresh_state_then_final_holds_and_kept_state_fails_actor02() -> None:
    process, node = restarts("worker-1", "WORKER_DIED"), restarts("worker-3", "NODE_DIED")
    assert restarts_once(process, node, "ActorDiedError", 26.5).held
    kept = deepcopy(process.seen)
    kept["rounds"][0]["state_reset"] = False
    verdict = restarts_once(replace(process, seen=kept), node, "ActorDiedError", 26.5)
    assert verdict.outcome == "failed"
    assert "fresh __init__" in verdict.reason
    stayed = restarts("worker-2", "NODE_DIED")
    assert "off the dead node" in restarts_once(process, stayed, "ActorDiedError", 26.5).reason


def calls(retries: bool, lost: int = 0) -> dict[str, Any]:
    results: list[dict[str, Any]]
    if retries:
        results = [{"i": i, "ok": "survived" if i == 10 else i} for i in range(40) if i != 39]
        return {
            "results": results,
            "error_counts": {},
            "ok_count": 39,
            "pids": [1, 2],
            "order_kept": True,
        }
    results = [{"i": i, "ok": i} for i in range(10)]
    for i in range(lost):
        results[9 - i] = {"i": 9 - i, "error": "ActorUnavailableError"}
    results += [{"i": 10, "error": "ActorUnavailableError", "bases": ["RayActorError"]}]
    results += [{"i": i, "error": "ActorUnavailableError"} for i in range(11, 40)]
    found: dict[str, Any] = {
        "results": results,
        "executed": list(range(10)),
        "pids": [1],
        "error_counts": {"ActorUnavailableError": 30 + lost},
    }
    return found


def test_queued_calls_fail_without_task_retries_and_succeed_in_order_with_them() -> None:
    assert calls_during_restart(calls(False), calls(True)).held
    assert calls_during_restart(calls(False, lost=1), calls(True)).held  # a reply lost, it ran
    reordered = {**calls(True), "order_kept": False}
    verdict = calls_during_restart(calls(False), reordered)
    assert verdict.outcome == "failed"
    assert "submission order" in verdict.reason


def test_a_child_that_outlives_its_owner_fails_actor04() -> None:
    seen = {
        "child_errors": [DIED], "t_child_final": T0 + 0.4, "child_state_api": dead_row("OWNER_DIED"),
        "detached_error": None, "detached_state_api": {"state": "ALIVE"},
    }  # fmt: skip
    assert dies_with_owner(Struck(seen, T0), "ActorDiedError", "OWNER_DIED").held
    late = dies_with_owner(
        Struck({**seen, "t_child_final": T0 + 30}, T0), "ActorDiedError", "OWNER_DIED"
    )
    assert late.outcome == "failed"
    assert "died 30.0 s after its owner" in late.reason


LOST: dict[str, Any] = {
    "type": "ObjectReconstructionFailedMaxAttemptsExceededError",
    "bases": ["ObjectLostError", "RayError"],
    "reason": "RETRIES_DISABLED",
    "message": "… set max_retries …",
}


def test_an_output_lost_without_retries_and_remade_with_them_holds_actor05() -> None:
    expect = LostOutput(LOST["type"], "RETRIES_DISABLED", 26.5)
    disabled = Struck({"error": LOST, "t_outcome": T0 + 5.0}, T0)
    remade = Struck(
        {
            "error": None,
            "value": {"nbytes": 4 * 1024 * 1024},
            "actor_after": {"node_name": "worker-3"},
            "t_outcome": T0 + 9.0,
        },
        T0,
    )
    assert output_reconstructed(disabled, remade, expect).held
    no_reason = replace(disabled, seen={**disabled.seen, "error": {**LOST, "reason": None}})
    assert (
        "expected reason RETRIES_DISABLED" in output_reconstructed(no_reason, remade, expect).reason
    )
    never = replace(remade, seen={**remade.seen, "error": LOST, "value": None})
    assert "must be re-made" in output_reconstructed(disabled, never, expect).reason
