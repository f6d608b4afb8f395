"""ACTOR-01 … ACTOR-05 as pure verdicts over what ``workloads.actors`` reported and the
observer saw.

Each run's record: the errors the caller saw (type and bases, oldest first), the State API's
row of the actor (state, ``num_restarts``, death cause), the times the workload reported, the
restart rounds of a restartable actor and the states it went through, as the workload polled
them and as the observer sampled them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Band, Judging, death_cause, verdict

Seen = Mapping[str, Any]
#: What a caller may see before the final error while a death is unconfirmed: our bounded
#: ``ray.get`` timing out (a killed container answers nothing) or ActorUnavailableError.
TRANSIENT = {"GetTimeoutError", "ActorUnavailableError"}
#: A process death is seen by its connection dropping, not by health checks: observed at
#: once (< 0.3 s). Bound: the strike's own `docker exec kill` (~1 s on this loaded host)
#: plus the caller's 0.2 s ping period, with room to spare — well under any node-death band.
PROCESS_DEATH_S = 5.0
MB = 1024 * 1024


@dataclass(frozen=True)
class Struck:
    """A strike under an actor's workload: its record, the strike's time, and what the
    observer last saw of the actor (its states as ``(state, num_restarts)``, oldest first)."""

    seen: Seen
    killed_at: float
    observed: Sequence[tuple[Any, Any]] = ()


def _since(j: Judging, struck: Struck, key: str) -> float:
    at = j.found(struck.seen.get(key), f"the workload did not report {key}")
    return round(float(at) - struck.killed_at, 2)


def _died(j: Judging, label: str, errors: Sequence[Mapping[str, Any]], final: str) -> None:
    """The caller's calls end in ``final`` (a RayActorError), after transient errors only."""
    j.require(bool(errors), f"{label}: the caller saw no error")
    *before, last = errors
    types = [e["type"] for e in errors]
    j.require(last["type"] == final, f"{label}: final error {types}, expected {final}")
    j.require("RayActorError" in [last["type"], *last["bases"]], f"{label}: {last['bases']}")
    j.require(
        {e["type"] for e in before} <= TRANSIENT, f"{label}: errors before the final: {types}"
    )


def _dead_row(
    j: Judging, label: str, row: Mapping[str, Any], restarts: int, cause: str
) -> dict[str, Any]:
    j.require(
        row["state"] == "DEAD" and row["num_restarts"] == restarts,
        f"{label}: State API DEAD with {restarts} restarts: {row}",
    )
    found = death_cause(dict(row))
    j.require(found.get("reason") == cause, f"{label}: death cause {cause}: {found}")
    return found


@verdict("ACTOR-01")
def dies_without_restarts(j: Judging, process: Struck, node: Struck, band: Band, final: str) -> str:
    """``max_restarts=0``: not restarted; calls fail with the final error; the State API says
    DEAD with death cause WORKER_DIED (process SIGKILL, seen at once) or NODE_DIED with the
    node's UNEXPECTED_TERMINATION (node killed: final once the GCS marks the node DEAD)."""
    _died(j, "process kill", process.seen["errors"], final)
    at_once = j.measure("ACTOR-01 process kill → final error (s)", _since(j, process, "t_final"))
    j.require(
        at_once < PROCESS_DEATH_S, f"a dead process must be noticed at once, took {at_once} s"
    )
    _dead_row(j, "process kill", process.seen["state_api"], 0, "WORKER_DIED")
    j.require(
        bool(process.observed) and process.observed[-1][0] == "DEAD",
        f"process kill: the observer's last state {list(process.observed)[-1:]}, expected DEAD",
    )
    _died(j, "node kill", node.seen["errors"], final)
    after = j.measure(
        "ACTOR-01 node kill → final error (s)",
        _since(j, node, "t_final"),
        band=(band.low, band.high),
        start=node.killed_at,
    )
    # Calls hang until the GCS marks the node DEAD; then the death is final.
    j.require(after in band, f"final error {after} s after the node kill, outside {band}")
    cause = _dead_row(j, "node kill", node.seen["state_api"], 0, "NODE_DIED")
    j.require(
        cause.get("node_death_info", {}).get("reason") == "UNEXPECTED_TERMINATION",
        f"node kill: the node's death info: {cause}",
    )
    return f"final after a process kill ({at_once} s) and a node kill ({after} s), never restarted"


def _restarted_once(
    j: Judging, label: str, struck: Struck, final: str, cause: str
) -> dict[str, Any]:
    """Round 0 restarted with fresh state in a new process; round 1 final; RESTARTING →
    ALIVE → DEAD seen by the workload or the observer."""
    rounds = struck.seen["rounds"]
    j.require(len(rounds) == 2, f"{label}: two rounds: {rounds}")
    first, last = rounds[0], rounds[-1]
    j.require(
        bool(first["restarted"]) and bool(first["state_reset"]),
        f"{label}: restart with a fresh __init__: {first}",
    )
    # PIDs are per container: a restart on another node may reuse the number (2.59: 116 → 116).
    before = (first["node_name"], first["pid"])
    after = (first["after_node_name"], first["after"]["pid"])
    j.require(after != before, f"{label}: a new process: {before} → {after}")
    j.require(set(first["errors_during"]) <= TRANSIENT, f"{label}: {first['errors_during']}")
    j.require(not last["restarted"], f"{label}: the death after 1 restart is final: {last}")
    j.require(last["final_errors"][-1]["type"] == final, f"{label}: {last['final_errors']}")
    _dead_row(j, label, struck.seen["state_api"], 1, cause)
    workload = [(t["state"], t["num_restarts"]) for t in struck.seen["state_transitions"]]
    for states in (workload, list(struck.observed)):
        j.require(states[-2:] == [("ALIVE", 1), ("DEAD", 1)], f"{label}: states {states}")
    # RESTARTING lasts ~1.5 s; two 0.25 s samplers (workload's, observer's) catch it.
    j.require(
        ("RESTARTING", 1) in workload + list(struck.observed),
        f"{label}: RESTARTING never seen: {workload}, {list(struck.observed)}",
    )
    return dict(first)


@verdict("ACTOR-02")
def restarts_once(j: Judging, process: Struck, node: Struck, final: str, latest_s: float) -> str:
    """``max_restarts=1``: the first death restarts the actor (``__init__`` again, in-memory
    state lost; on its own node after a process death, on another after its node died, by
    ``latest_s``), ``num_restarts`` 1; the second death is final."""
    first = _restarted_once(j, "process kill", process, final, "WORKER_DIED")
    j.require(
        first["after_node_name"] == "worker-1",
        f"a process death restarts on its own node: {first['after_node_name']}",
    )
    j.measure("ACTOR-02 process kill → restarted (s)", first["restart_s"])
    moved = _restarted_once(j, "node kill", node, final, "NODE_DIED")
    j.require(
        moved["after_node_name"] in ("worker-1", "worker-3"),
        f"restarted off the dead node: {moved['after_node_name']}",
    )
    back = j.measure(
        "ACTOR-02 node kill → restarted elsewhere (s)",
        round(moved["t_alive"] + moved["restart_s"] - node.killed_at, 2),
    )
    j.require(back <= latest_s, f"restarted {back} s after the node kill (bound {latest_s} s)")
    return f"restarted once with fresh state (off the dead node {back} s after), then final"


@verdict("ACTOR-03")
def calls_during_restart(j: Judging, no_retries: Seen, retried: Seen) -> str:
    """Calls queued when the actor's process dies (call 10 of 40 kills it) fail with
    ActorUnavailableError unless ``max_task_retries=-1``; with it every call succeeds, in
    submission order, the later ones on the restarted process. A reply lost with the killed
    process is allowed only for a call its log shows ran (at-most-once execution)."""
    results = no_retries["results"]
    ok = [r["i"] for r in results if "ok" in r]
    lost = [r["i"] for r in results[:10] if "error" in r]
    j.require(ok == [i for i in range(10) if i not in lost], f"ok {ok}, lost {lost}")
    executed = j.found(no_retries["executed"], "the restarted actor never answered within 120 s")
    j.require(set(lost) <= set(executed), f"failed before the kill but never ran: {no_retries}")
    j.require(len(no_retries["pids"]) == 1, f"one process answered: {no_retries['pids']}")
    j.measure("ACTOR-03 replies lost with the killed process", len(lost))
    unavailable = {"ActorUnavailableError": 30 + len(lost)}
    j.require(no_retries["error_counts"] == unavailable, f"{no_retries['error_counts']}")
    j.require(
        results[10].get("error") == "ActorUnavailableError"
        and "RayActorError" in results[10].get("bases", []),
        f"the killing call fails with ActorUnavailableError: {results[10]}",
    )  # fmt: skip
    j.require(retried["error_counts"] == {}, f"with retries: {retried['error_counts']}")
    j.require(
        retried["ok_count"] == 39 and retried["results"][10].get("ok") == "survived",
        f"with retries every call succeeds: {retried['results'][10]}",
    )
    j.require(len(retried["pids"]) == 2, "calls after the kill ran on the restarted process")
    j.require(bool(retried["order_kept"]), "submission order must be kept across the restart")
    return f"30 queued calls failed with ActorUnavailableError ({len(lost)} reply lost); with retries all 39 in order"


@verdict("ACTOR-04")
def dies_with_owner(j: Judging, struck: Struck, final: str, cause: str) -> str:
    """A non-detached actor dies with its owner despite restarts left (``cause``: OWNER_DIED;
    REF_DELETED before 2.51.0), at once; a detached one survives."""
    seen = struck.seen
    _died(j, "the child", seen["child_errors"], final)
    gone = j.measure(
        "ACTOR-04 owner kill → child final error (s)", _since(j, struck, "t_child_final")
    )
    j.require(gone < PROCESS_DEATH_S, f"child died {gone} s after its owner")
    _dead_row(j, "the child", seen["child_state_api"], 0, cause)
    j.require(seen["detached_error"] is None, f"the detached actor must answer: {seen}")
    j.require(seen["detached_state_api"]["state"] == "ALIVE", f"{seen['detached_state_api']}")
    return f"the child died with its owner ({cause}, {gone} s), the detached actor answered"


@dataclass(frozen=True)
class LostOutput:
    """ACTOR-05's expectations for the release: the error type and reason a lost output
    without task retries raises (``reason``: None where the release gives none)."""

    error_type: str
    reason: str | None
    latest_s: float


@verdict("ACTOR-05")
def output_reconstructed(j: Judging, disabled: Struck, retried: Struck, expect: LostOutput) -> str:
    """An actor task's output lost with its node: with ``max_task_retries=0`` reading it
    fails as unreconstructable (RETRIES_DISABLED, an ObjectLostError); with ``-1`` the
    restarted actor re-runs the method and the read returns the 4 MiB value, both within
    ``latest_s`` of the kill."""
    err = j.found(disabled.seen["error"], f"the output must be lost: {disabled.seen}")
    j.require(err["type"] == expect.error_type, f"expected {expect.error_type}: {err}")
    j.require(err.get("reason") == expect.reason, f"expected reason {expect.reason}: {err}")
    j.require("ObjectLostError" in [err["type"], *err["bases"]], f"an ObjectLostError: {err}")
    # Docs/message gap (notes, ACTOR-05): the advice names max_retries, not max_task_retries.
    j.measure("ACTOR-05 advice names max_task_retries", "max_task_retries" in err["message"])
    failed = j.measure("ACTOR-05 kill → output lost (s)", _since(j, disabled, "t_outcome"))
    j.require(failed <= expect.latest_s, f"read failed {failed} s after the kill")
    seen = retried.seen
    j.require(
        seen["error"] is None and seen["value"]["nbytes"] == 4 * MB,
        f"the output must be re-made: {seen}",
    )
    j.require(
        seen["actor_after"]["node_name"] not in ("worker-1", "worker-2"),
        f"the actor restarted off the dead nodes: {seen['actor_after']}",
    )
    read = j.measure("ACTOR-05 kill → output re-made (s)", _since(j, retried, "t_outcome"))
    j.require(read <= expect.latest_s, f"read {read} s after the kill")
    return f"lost without task retries ({expect.error_type}), re-made with them {read} s after the kill"
