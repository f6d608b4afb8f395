"""NODE-01 … NODE-04 as pure verdicts: a node's death as its work, Ray's records and the
driver saw it, and a node started again on the same host.

The record (``workloads.nodes:node_death`` on the victim, polled by a driver): the task's
error and its attempts, the actor's errors and its State API row, when ``ray.nodes()`` showed
the node dead, the node's ``ray.nodes()`` death record and State API row; the driver's output
lines carrying the GCS's "marked dead" error for the node; the strike's time and the band the
health-check knobs imply. NODE-03's (``workloads.nodes:node_rejoins``): per restart, when
``ray.nodes()`` showed the old id dead, the old and new ids and the IP the workload saw, the
old id's ``ray.nodes()`` record and State API rows of both ids, whether a task pinned to the
new id ran; the harness's id and IP of the node after the restart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import (
    DEATH_REASON,
    MISSED_HEARTBEATS,
    Band,
    Judging,
    attempts,
    death_cause,
    verdict,
)


@dataclass(frozen=True)
class NodeStrike:
    """One strike on a node with work on it, as the run recorded it."""

    label: str
    injected_at: float
    seen: Mapping[str, Any]
    #: The driver's lines carrying the GCS's "marked dead" error for the node's address.
    pushed: Sequence[str]
    #: Whether this Ray release fills ``ray.nodes()``'s death record (``ray_nodes_death_record``).
    death_record: bool


def _since(strike: NodeStrike, t: float | None, j: Judging) -> float:
    at = j.found(t, f"{strike.label}: the workload did not report the time")
    return round(float(at) - strike.injected_at, 2)


def _record(j: Judging, strike: NodeStrike, reason: str, message: str) -> None:
    """``ray.nodes()``'s death record and the State API's node row."""
    seen = strike.seen
    j.require(bool(seen["dead"]), f"{strike.label}: the workload never saw the node dead")
    record = seen["ray_nodes_record"]
    j.require(record["Alive"] is False, f"{strike.label}: ray.nodes() still says alive: {record}")
    if strike.death_record:
        j.require(
            DEATH_REASON.get(record["DeathReason"]) == reason
            and record["DeathReasonMessage"] == message,
            f"{strike.label}: ray.nodes() death record, expected {reason} '{message}': {record}",
        )
    state = seen["state_api_node"]
    prefix = "Unexpected" if reason == "UNEXPECTED_TERMINATION" else "Expected"
    j.require(
        state["state"] == "DEAD" and state["state_message"] == f"{prefix} termination: {message}",
        f"{strike.label}: State API node row, expected DEAD '{prefix} termination: {message}': "
        f"{state}",
    )


def _work_failed(j: Judging, strike: NodeStrike) -> None:
    """The node's task got NodeDiedError (one attempt, FAILED with NODE_DIED), its actor
    ActorDiedError after at most timeouts or unavailability (cause NODE_DIED)."""
    seen = strike.seen
    error = seen["task_error"]
    j.require(
        error is not None and error["type"] == "NodeDiedError",
        f"{strike.label}: the task must fail with NodeDiedError: {error}",
    )
    j.require(
        attempts(seen["task_attempts"]) == [["FAILED", "NODE_DIED"]],
        f"{strike.label}: one attempt, FAILED with NODE_DIED: {seen['task_attempts']}",
    )
    errors = [e["type"] for e in seen["actor_errors"]]
    j.require(
        bool(errors) and errors[-1] == "ActorDiedError"
        and set(errors[:-1]) <= {"GetTimeoutError", "ActorUnavailableError"},
        f"{strike.label}: the actor's calls must end in ActorDiedError: {errors}",
    )  # fmt: skip
    cause = death_cause(seen["actor_state_api"]).get("reason")
    j.require(cause == "NODE_DIED", f"{strike.label}: the actor's death cause is {cause}")
    j.measure(f"{strike.label} → task NodeDiedError (s)", _since(strike, seen["t_task_outcome"], j))
    j.measure(
        f"{strike.label} → actor ActorDiedError (s)", _since(strike, seen["t_actor_final"], j)
    )


def _dead_in_band(j: Judging, strike: NodeStrike, band: Band) -> float:
    """``ray.nodes()`` showed the node dead within the health-check band of the strike."""
    j.measure("health-check band", str(band))
    window = j.measure(
        f"{strike.label} → node DEAD, ray.nodes() (s)",
        _since(strike, strike.seen["t_dead_seen"], j),
        band=(band.low, band.high),
        start=strike.injected_at,
    )
    j.require(
        window in band, f"{strike.label}: node DEAD {window} s after the strike, outside {band}"
    )
    return float(window)


def _unexpected(j: Judging, strike: NodeStrike, band: Band) -> str:
    _record(j, strike, "UNEXPECTED_TERMINATION", MISSED_HEARTBEATS)
    _work_failed(j, strike)
    window = _dead_in_band(j, strike, band)
    j.require(bool(strike.pushed), f"{strike.label}: no 'marked dead' error pushed to the driver")
    return (
        f"work failed (NodeDiedError, ActorDiedError), DEAD {window} s after the strike within "
        f"{band.low:.1f}-{band.high:.1f} s, UNEXPECTED_TERMINATION, the error pushed"
    )


@verdict("NODE-01")
def killed_node(j: Judging, strike: NodeStrike, band: Band) -> str:
    """A killed container is a node failure: its work fails, the node is DEAD within the
    health-check band, UNEXPECTED_TERMINATION with Ray's missed-heartbeats message, and the GCS
    pushes the "marked dead" error to the driver."""
    return _unexpected(j, strike, band)


@verdict("NODE-02")
def killed_raylet(j: Judging, strike: NodeStrike, band: Band) -> str:
    """A killed raylet (its container up) is a node failure, exactly as NODE-01."""
    return _unexpected(j, strike, band)


@verdict("NODE-04")
def graceful_stop(j: Judging, strike: NodeStrike, band: Band, sigterm_at: float) -> str:
    """``ray stop`` is EXPECTED_TERMINATION ("received SIGTERM"): the work fails as for a
    failure, the raylet unregisters itself (the GCS's end time within the band of the
    raylet's SIGTERM line: no health-check wait), and no error is pushed to the driver."""
    _record(j, strike, "EXPECTED_TERMINATION", "received SIGTERM")
    _work_failed(j, strike)
    j.measure(
        "NODE-04 ray stop → DEAD, ray.nodes() (s)", _since(strike, strike.seen["t_dead_seen"], j)
    )
    # Timed on Ray's own clocks (the raylet's log line, the GCS's end time), because `ray stop`
    # itself needs seconds to start on a loaded host (CI: DEAD 14.2 s after the strike; 0.8 s
    # on an idle one).
    dead = j.measure(
        "NODE-04 raylet got SIGTERM → GCS end time (s)",
        round(strike.seen["state_api_node"]["end_time_ms"] / 1000 - sigterm_at, 3),
    )
    j.require(-0.01 <= dead < band.high, f"GCS end time {dead} s after the raylet's SIGTERM")
    j.require(not strike.pushed, f"a graceful stop pushed an error: {list(strike.pushed)}")
    return f"EXPECTED_TERMINATION, DEAD {dead} s after the raylet's SIGTERM, no error pushed"


@dataclass(frozen=True)
class Restart:
    """One NODE-03 restart: the node killed (``how``: its container or its raylet) and started
    again on the same host, as the run recorded it."""

    how: str
    killed_at: float
    #: When the workload's ``ray.nodes()`` showed the old id dead (wall clock).
    dead_seen: float | None
    restarted_at: float
    old_id: str
    #: The harness's id and IP of the node once it was ALIVE again.
    new_id: str | None
    ip: str
    #: ``workloads.nodes:node_rejoins``'s result.
    seen: Mapping[str, Any]


def _dead_within(j: Judging, label: str, killed_at: float, t: float | None, band: Band) -> None:
    """``ray.nodes()`` showed the node dead within the health-check band of the kill."""
    j.measure("health-check band", str(band))
    at = j.found(t, f"{label}: the workload did not report the time")
    window = j.measure(
        f"{label} → node DEAD, ray.nodes() (s)",
        round(float(at) - killed_at, 2),
        band=(band.low, band.high),
        start=killed_at,
    )
    j.require(window in band, f"{label}: node DEAD {window} s after the strike, outside {band}")


def _rejoined(j: Judging, restart: Restart) -> None:
    """Started again, the node registered a new id at the same IP; the old id DEAD in
    ``ray.nodes()`` and the State API, the new one ALIVE and running work pinned to it."""
    seen, old, new = restart.seen, restart.old_id, restart.new_id
    label = f"NODE-03 {restart.how}"
    j.require(bool(new) and new != old, f"{label}: the restarted node must have a new id: {new}")
    j.require(
        seen["old_node_id"] == old and seen["new_node_id"] == new,
        f"{label}: the workload saw ids {seen['old_node_id']} → {seen['new_node_id']}, the "
        f"harness {old} → {new}",
    )
    j.require(
        not seen["same_id"] and restart.ip == seen["ip"],
        f"{label}: a new id at the same IP ({restart.ip}): {seen}",
    )
    j.require(
        seen["old_record"]["Alive"] is False, f"{label}: ray.nodes() old id: {seen['old_record']}"
    )
    j.require(
        seen["state_api_old"]["state"] == "DEAD",
        f"{label}: State API old id must be DEAD: {seen['state_api_old']}",
    )
    j.require(
        seen["state_api_new"]["state"] == "ALIVE",
        f"{label}: State API new id must be ALIVE: {seen['state_api_new']}",
    )
    j.require(
        seen.get("task_on_new") is True, f"{label}: a task pinned to the new id must run: {seen}"
    )
    at = j.found(seen.get("t_new_alive_seen"), f"{label}: the workload did not report the time")
    j.measure(
        f"NODE-03 {restart.how}: restart → new id ALIVE (s)",
        round(float(at) - restart.restarted_at, 2),
    )


@verdict("NODE-03")
def rejoins_under_a_new_id(j: Judging, restarts: Sequence[Restart], band: Band) -> str:
    """A node (container killed) or a raylet (killed) started again on the same host and IP
    registers a new node id; the old id, DEAD within the health-check band of the kill, stays
    DEAD."""
    if not restarts:
        j.unknown("no restart was recorded")
    for restart in restarts:
        label = f"NODE-03 {restart.how} kill"
        _dead_within(j, label, restart.killed_at, restart.dead_seen, band)
        _rejoined(j, restart)
    return (
        f"{', '.join(r.how for r in restarts)} restarted: a new id at the same IP each time, the "
        "old id DEAD within the band and still DEAD"
    )
