"""STORE-01 … STORE-03, OOM-01, OOM-02 and the memory-knob half of ADVICE-01 as pure verdicts.

The records: ``workloads.store:fill_store``'s result (the store's size in MiB; ``put_ok`` puts
that succeeded and the first put's ``error`` — type, bases, message and the ``index`` of the
put that raised it; ``readable`` objects read back; ``spilled_mib`` and ``fallback_mib`` as
``ray memory --stats-only`` shows them; the ``system_config`` the head's ``gcs_server`` was
started with) and, for STORE-03, the raylet's file-system monitor line about the spill disk;
``oom_task``'s cases (outcome, attempts counted on the node, the State API's attempts), the
node's workers' exit types and whether the node stayed ALIVE; ``memory_threshold_effect``'s
outcome per node of holding a fraction of its memory; ``logical_memory``'s head resources and
where the actors it created landed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Finding, Judging, verdict

Seen = Mapping[str, Any]
MIB = 1024 * 1024

#: ``local_fs_capacity_threshold`` (ray_config_def.h): spilling stops when a disk is this full.
LOCAL_FS_CAPACITY_THRESHOLD = 0.95
#: STORE-01: the least ``ray memory`` must show spilled: half the 300 MiB put, below the 200 MiB
#: that cannot be in a 100 MiB store (measured: 240-260 MiB spilled, data/store.json).
SPILLED_AT_LEAST_MIB = 150
#: OOM-01: the worker processes the memory monitor must have killed (exit type
#: NODE_OUT_OF_MEMORY): the ``max_retries=0`` case's one and the retried case's three heavy
#: attempts (measured: 4 in each of 5 runs, data/oom.json).
OOM_KILLS = 4
#: OOM-02: ``logical_memory`` waits at most 30 s (workloads/store.py) for the killed actors'
#: memory to come back; a value at the bound is its wait running out (measured 0.53-0.9 s).
FREED_WAIT_S = 30
#: The file-system monitor's line (file_system_monitor.cc): "<path> is over 95% full, …".
OVER_THRESHOLD = re.compile(r"is over ([\d.]+)% full")


class SpilledDespiteEnvKnob(Finding):
    """STORE-02's first finding: with ``RAY_automatic_object_spilling_enabled=0`` in the
    raylet's environment, the system config still says true and the store spilled."""

    claims: ClassVar[tuple[str, ...]] = ("STORE-02",)


class FallbackAllocatedInsteadOfStoreFull(Finding):
    """STORE-02's second finding: with spilling off in the system config, nothing spilled, every
    put succeeded and the excess sits in plasma's filesystem fallback allocation."""

    claims: ClassVar[tuple[str, ...]] = ("STORE-02",)


class OutOfDiskInsteadOfStoreFull(Finding):
    """STORE-02's third finding: with spilling off and the fallback directory full, the put that
    fits nowhere raises ``OutOfDiskError``."""

    claims: ClassVar[tuple[str, ...]] = ("STORE-02",)


@dataclass(frozen=True)
class Fill:
    """What ``fill_store`` was asked to keep alive: ``total_mb`` in objects of ``size_mb``."""

    total_mb: int
    size_mb: int

    @property
    def puts(self) -> int:
        return self.total_mb // self.size_mb


def spilling_flag(seen: Seen) -> Any:
    """``automatic_object_spilling_enabled`` in the system config the GCS was started with."""
    return seen["system_config"].get("automatic_object_spilling_enabled")


@verdict("STORE-01")
def spilled_past_the_store(j: Judging, seen: Seen, fill: Fill) -> str:
    """More live objects than the store holds: no error, every object readable, and the
    excess spilled (``ray memory`` shows the bytes)."""
    j.require(
        seen["error"] is None and seen["put_ok"] == fill.puts,
        f"every put must succeed: {seen['put_ok']} of {fill.puts}, error {seen['error']}",
    )
    j.require(
        seen["readable"] == fill.puts,
        f"every object must read back: {seen['readable']} of {fill.puts}, {seen['read_error']}",
    )
    spilled = seen["spilled_mib"]
    j.require(
        spilled is not None and spilled >= SPILLED_AT_LEAST_MIB,
        f"ray memory must show at least {SPILLED_AT_LEAST_MIB} MiB spilled: {seen['memory_stats']}",
    )
    return f"{fill.puts} puts of {fill.size_mb} MiB succeeded and read back, {spilled} MiB spilled"


def _store_full(j: Judging, seen: Seen) -> str:
    """The put that no longer fits raised ``ObjectStoreFullError``."""
    error = seen["error"] or {}
    j.require(
        error.get("type") == "ObjectStoreFullError",
        f"the put that no longer fits must raise ObjectStoreFullError: {seen['error']}",
    )
    return f"put {error.get('index', '?')} raised ObjectStoreFullError"


@verdict("STORE-02")
def store_full_with_the_env_knob(j: Judging, seen: Seen, fill: Fill) -> str:
    """With ``RAY_automatic_object_spilling_enabled=0`` (as runbooks disable spilling) the put
    that no longer fits raises ``ObjectStoreFullError``. Every put succeeding, spilled, with the
    system config saying true is the finding :class:`SpilledDespiteEnvKnob`."""
    flag = spilling_flag(seen)
    j.require(
        not (
            not seen["error"]
            and seen["put_ok"] == fill.puts
            and (seen["spilled_mib"] or 0) > 0
            and flag is True
        ),
        f"no ObjectStoreFullError: {seen['put_ok']} puts succeeded, {seen['spilled_mib']} MiB "
        f"spilled; the system config says automatic_object_spilling_enabled={flag}",
        SpilledDespiteEnvKnob,
    )
    return _store_full(j, seen)


@verdict("STORE-02")
def store_full_without_spilling(j: Judging, seen: Seen, fill: Fill) -> str:
    """With spilling really off (the system config), the put that no longer fits raises
    ``ObjectStoreFullError``. Every put succeeding and reading back, nothing spilled, and the
    excess over the store in plasma's filesystem fallback is the finding
    :class:`FallbackAllocatedInsteadOfStoreFull`."""
    fallback = seen["fallback_mib"] or 0
    j.require(
        not (
            not seen["error"]
            and seen["put_ok"] == fill.puts
            and seen["readable"] == fill.puts
            and seen["spilled_mib"] is None
            and fallback >= fill.total_mb - seen["store_mib"]
        ),
        f"no ObjectStoreFullError: {seen['put_ok']} puts succeeded, nothing spilled, "
        f"{fallback} MiB in plasma's filesystem fallback allocation",
        FallbackAllocatedInsteadOfStoreFull,
    )
    return _store_full(j, seen)


@verdict("STORE-02")
def store_full_once_the_fallback_is_full(
    j: Judging, seen: Seen, fill: Fill, fallback_mb: int
) -> str:
    """Spilling off and plasma's fallback directory ``fallback_mb`` MiB: the put that fits
    neither the store nor the fallback raises ``ObjectStoreFullError``. That put raising
    ``OutOfDiskError`` with nothing spilled and the fallback used is the finding
    :class:`OutOfDiskInsteadOfStoreFull`."""
    fits = int(seen["store_mib"]) // fill.size_mb + fallback_mb // fill.size_mb
    error = seen["error"] or {}
    j.require(
        not (
            error.get("type") == "OutOfDiskError"
            and error.get("index") == fits
            and seen["spilled_mib"] is None
            and (seen["fallback_mib"] or 0) >= fill.size_mb
        ),
        f"put {fits + 1} raised OutOfDiskError with {seen['fallback_mib']} MiB in the "
        f"fallback and nothing spilled: {error.get('message', '')[:200]}",
        OutOfDiskInsteadOfStoreFull,
    )
    return _store_full(j, seen)


@verdict("STORE-03")
def full_spill_disk(j: Judging, seen: Seen, fill: Fill, monitor: str | None, disk: str) -> str:
    """A spill disk over ``local_fs_capacity_threshold``: the put that must spill raises
    ``OutOfDiskError`` (a ``RayError``, "Local disk is full") before all ``fill`` is in, and
    the raylet's file-system monitor logged ``disk`` over that threshold (``monitor``: its
    line, None when the raylet's log has none)."""
    error = seen["error"] or {}
    j.require(error.get("type") == "OutOfDiskError", f"expected OutOfDiskError: {seen['error']}")
    j.require("RayError" in error["bases"], f"OutOfDiskError must be a RayError: {error}")
    j.require("Local disk is full" in error["message"], f"expected 'Local disk is full': {error}")
    j.require(
        error["index"] < fill.puts,
        f"the failing put comes before all {fill.total_mb} MiB are in: put {error['index']}",
    )
    # The cause is the threshold itself: the raylet's file-system monitor reported the spill
    # disk over local_fs_capacity_threshold before the put failed.
    logged = j.found(monitor, f"the raylet never logged {disk} over its threshold")
    over = j.found(OVER_THRESHOLD.search(logged), f"no threshold in the monitor's line: {logged}")
    j.require(
        float(over.group(1)) == LOCAL_FS_CAPACITY_THRESHOLD * 100,
        f"the monitor's threshold {over.group(1)} % is not local_fs_capacity_threshold "
        f"{LOCAL_FS_CAPACITY_THRESHOLD}: {logged}",
    )
    return (
        f"put {error['index'] + 1} raised OutOfDiskError; the raylet logged {disk} over "
        f"{over.group(1)}% full"
    )


def _attempts(seen: Seen) -> list[tuple[Any, Any, Any]]:
    return [(s["attempt"], s["state"], s["error_type"]) for s in seen["state_api"]]


@verdict("OOM-01")
def kills_the_worker_not_the_node(j: Judging, seen: Seen) -> str:
    """Above ``memory_usage_threshold`` the raylet kills the task's worker: ``max_retries=0``
    fails with ``OutOfMemoryError``; ``max_retries=1`` is retried past its budget (OOM
    retries ignore it); exit type NODE_OUT_OF_MEMORY; the node stays ALIVE. ``seen["cases"]``:
    ``max_retries=0`` with one heavy attempt, ``max_retries=1`` with three."""
    no_retry, retried = seen["cases"]
    j.require(
        not no_retry["ok"] and no_retry["error"]["type"] == "OutOfMemoryError",
        f"max_retries=0 must fail with OutOfMemoryError: {no_retry}",
    )
    j.require(
        "RayError" in no_retry["error"]["bases"],
        f"OutOfMemoryError must be a RayError: {no_retry['error']['bases']}",
    )
    j.require(
        no_retry["attempts_on_node"] == 1,
        f"max_retries=0: one attempt, saw {no_retry['attempts_on_node']}",
    )
    j.require(
        _attempts(no_retry) == [(0, "FAILED", "OUT_OF_MEMORY")],
        f"max_retries=0: one attempt FAILED with OUT_OF_MEMORY: {no_retry['state_api']}",
    )
    j.require(
        retried["ok"] and retried["value"] == {"attempt": 4, "survived_heavy": False},
        f"max_retries=1 must return from its fourth attempt: {retried}",
    )
    j.require(
        retried["attempts_on_node"] == 4,
        f"3 OOM kills with max_retries=1: budget ignored; saw {retried['attempts_on_node']} "
        "attempts",
    )
    j.require(
        sorted(_attempts(retried))
        == [
            (0, "FAILED", "OUT_OF_MEMORY"),
            (1, "FAILED", "OUT_OF_MEMORY"),
            (2, "FAILED", "OUT_OF_MEMORY"),
            (3, "FINISHED", None),
        ],
        f"max_retries=1: three attempts FAILED with OUT_OF_MEMORY, one FINISHED: "
        f"{retried['state_api']}",
    )
    exits = seen["worker_exit_types"]
    oom_exits = sum(v for k, v in exits.items() if "NODE_OUT_OF_MEMORY" in k)
    j.require(oom_exits >= OOM_KILLS, f"{OOM_KILLS} NODE_OUT_OF_MEMORY worker exits: {exits}")
    j.require(bool(seen["node_alive"]), "the node must survive: the raylet kills workers instead")
    return (
        "max_retries=0 failed with OutOfMemoryError after one attempt; max_retries=1 returned "
        f"from its fourth; {oom_exits} workers exited NODE_OUT_OF_MEMORY; the node stayed ALIVE"
    )


@verdict("ADVICE-01")
def oom_knobs_take_effect(j: Judging, held: Seen, fraction: float, threshold: float) -> str:
    """ADVICE-01's settings that exist work: holding ``fraction`` of a node's memory, between
    the knobbed ``threshold`` (``RAY_memory_usage_threshold``) and Ray's default, fails with
    ``OutOfMemoryError`` on the ``worker`` whose knobs are set and not on the ``control``."""
    knobbed, control = held["worker"], held["control"]
    j.require(
        not knobbed["ok"] and knobbed["error"]["type"] == "OutOfMemoryError",
        f"holding {fraction} over the knobbed threshold {threshold} must fail with "
        f"OutOfMemoryError: {knobbed}",
    )
    j.require(
        bool(control["ok"]), f"Ray's default threshold must let {fraction} be held: {control}"
    )
    lowest = control["value"]["lowest_while_held"]
    j.require(
        lowest > threshold,
        f"the control held only {lowest} of its memory: the comparison proves nothing",
    )
    return (
        f"holding {fraction} of a node's memory: OutOfMemoryError with "
        f"RAY_memory_usage_threshold={threshold}, held (at least {lowest}) with Ray's default"
    )


@dataclass(frozen=True)
class HeadCaps:
    """OOM-02's head: ``--memory`` and ``--object-store-memory`` (MiB), and the ``actors``
    ``logical_memory`` creates in each phase, declaring ``declared_mb`` in the second."""

    memory_mib: int
    store_mib: int
    declared_mb: int
    actors: int

    @property
    def fit(self) -> int:
        return self.memory_mib // self.declared_mb


@verdict("OOM-02")
def caps_only_declared_work(j: Judging, seen: Seen, caps: HeadCaps) -> str:
    """``--memory`` limits only actors that declare ``memory=`` (the rest wait as a pending
    demand); undeclared ones still land on the head, also by default from a driver there;
    ``--object-store-memory`` caps its store."""
    j.require(
        seen["head_memory_mib"] == caps.memory_mib
        and seen["head_object_store_mib"] == caps.store_mib,
        f"the head's memory {caps.memory_mib} MiB and store {caps.store_mib} MiB: {seen}",
    )
    j.require(
        seen["per_node_object_store_mib"]["worker"] > caps.store_mib,
        f"only the head's store is capped: {seen['per_node_object_store_mib']}",
    )
    undeclared = {"alive": caps.actors, "pending": 0, "nodes": ["head"] * caps.actors}
    j.require(
        seen["undeclared_on_head"] == undeclared,
        f"undeclared actors all land on the head: {seen['undeclared_on_head']}",
    )
    declared = seen["declared_on_head"]
    waiting = caps.actors - caps.fit
    j.require(
        (declared["alive"], declared["pending"], declared["expected_fit"])
        == (caps.fit, waiting, caps.fit),
        f"{caps.fit} declared actors fit, {waiting} waits: {declared}",
    )
    j.require(
        declared["states"].count("PENDING_CREATION") == waiting,
        f"{waiting} declared actor PENDING_CREATION: {declared}",
    )
    demand = f"'memory': {float(caps.declared_mb * MIB)}"
    j.require(
        any(demand in line for line in declared["pending_demands"]),
        f"the pending demand names {demand}: {declared['pending_demands']}",
    )
    j.require(
        seen["memory_freed_after_s"] < FREED_WAIT_S, "the killed actors' memory must come back"
    )
    # The workload's two default actors (no memory, no pin), from its driver on the head.
    j.require(
        seen["default_two_actors"] == {"head": 2, "worker": 0},
        "undeclared default actors from a driver on the head still land on it: "
        f"{seen['default_two_actors']}",
    )
    return (
        f"the head's store {caps.store_mib} MiB; {caps.actors} undeclared actors on it, "
        f"{caps.fit} of {caps.actors} declaring {caps.declared_mb} MiB ({waiting} pending); both "
        "default actors on the head"
    )
