"""VER-01 … VER-03, and PEND-03 as the version-skew experiment judges it, as pure verdicts over
how a skewed node's ``ray start``, or a skewed driver's ``ray.init``, ended.

The records: a node's ``ray start`` (its exit code, its output, and the seconds from its
container's start to its exit); what the cluster knew of the node afterwards (the State API's
node listing, and ``ray status``'s report once it was current); the interpreters of a driver
and of a worker process on the node; the error a driver of another release got.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from chaos.testing import Judging, verdict

#: `ray start` of a mismatched worker must give up "within seconds", counted from its
#: container's start. Ray sets no timeout on it: node.py's ``Node.__init__`` runs
#: ``check_version_info`` (one read of the cluster metadata) right after its GCS client
#: connects, before it spawns any process; only an unreachable GCS would stretch it
#: (``_init_gcs_client``'s RAY_NUM_REDIS_GET_RETRIES tries). The 60 s is a budget, not a
#: measured value: the runs' exit times were not kept (data/ver.json has none).
REJECT_WITHIN_S = 60


@dataclass(frozen=True)
class RayStart:
    """How ``ray start`` on ``node`` ended: its exit code, its output, and ``took``, the
    seconds from the node's container's start to the exit (the exit-code file's mtime)."""

    node: str
    rc: int
    log: str
    took: float


@dataclass(frozen=True)
class Registration:
    """What the cluster knew of ``node`` (at ``ip``) once its ``ray start`` had ended: the State
    API's node listing, and ``ray status``'s report once it counted at least ``cpus`` CPUs —
    ``cpus``, the CPUs of the nodes that joined (1 each)."""

    node: str
    ip: str
    nodes: str
    status: str
    cpus: int


class RaisedError(Protocol):
    """The error a workload's function raised, as data (``WorkloadRun.outcome().error``)."""

    @property
    def message(self) -> str: ...

    def isinstance(self, name: str) -> bool: ...


def _ended(j: Judging, start: RayStart) -> None:
    """``ray start`` ended within :data:`REJECT_WITHIN_S` of its container's start."""
    j.measure("ray start → exit (s)", start.took)
    j.require(start.took <= REJECT_WITHIN_S, f"ray start on {start.node} took {start.took:.0f} s")


def _never_registered(j: Judging, seen: Registration) -> None:
    """Neither the State API nor ``ray status`` knows the node: only the others' CPUs count."""
    j.require(seen.ip not in seen.nodes, f"{seen.node} must never register: {seen.nodes}")
    # The report names nodes by Ray node id, not address: the CPU total is what shows the node
    # uncounted (each node has 1 CPU).
    j.require(
        f"/{seen.cpus}.0 CPU" in seen.status,
        f"ray status must not count {seen.node}: {seen.status}",
    )


@verdict("VER-01")
def other_release_rejected(j: Judging, start: RayStart, seen: Registration, other: str) -> str:
    """``ray start`` of a worker with another Ray release (``other``) exits non-zero within
    seconds with the mismatch text naming it, and the node never registers."""
    _ended(j, start)
    j.require(start.rc != 0, f"ray start of a {other} worker must fail, exited {start.rc}")
    j.require(
        "Version mismatch" in start.log, f"expected the mismatch text, got: {start.log[-800:]}"
    )
    j.require(
        "The cluster was started with" in start.log,
        f"the mismatch text must say what the cluster was started with: {start.log[-800:]}",
    )
    j.require(f"Ray: {other}" in start.log, f"the text must name Ray {other}: {start.log[-800:]}")
    _never_registered(j, seen)
    return (
        f"ray start of a {other} worker exited {start.rc} after {start.took:.0f} s with the "
        "version mismatch; the node never registered"
    )


@verdict("PEND-03")
def mismatched_node_uncounted(j: Judging, seen: Registration) -> str:
    """A worker container that runs but never joined (another Ray release) is in neither the
    State API's nodes nor ``ray status``, and its CPU is not counted."""
    _never_registered(j, seen)
    return (
        f"{seen.node} in neither the State API nor ray status; {seen.cpus} CPUs counted, "
        "not its own"
    )


@verdict("VER-02")
def patch_skew_rejected(
    j: Judging, start: RayStart, seen: Registration, cluster_python: str, node_python: str
) -> str:
    """By default a node on another Python patch release (``node_python``) is rejected as a
    Ray release mismatch is: ``ray start`` exits non-zero with the mismatch text naming both
    Pythons, and the node never registers."""
    _ended(j, start)
    j.require(start.rc != 0, f"ray start on Python {node_python} must fail, exited {start.rc}")
    j.require(
        "Version mismatch: The cluster was started with" in start.log,
        f"expected the mismatch text, got: {start.log[-800:]}",
    )
    j.require(
        f"Python: {cluster_python}" in start.log and f"Python: {node_python}" in start.log,
        f"the text must name Python {cluster_python} and {node_python}: {start.log}",
    )
    _never_registered(j, seen)
    return (
        f"ray start on Python {node_python} (the cluster's {cluster_python}) exited {start.rc} "
        "with the version mismatch; the node never registered"
    )


@verdict("VER-02")
def patch_skew_warns_at_minor(
    j: Judging, start: RayStart, seen: Mapping[str, Any], cluster_python: str, node_python: str
) -> str:
    """With ``RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor`` the same node joins: ``ray
    start`` succeeds and only warns of the patch mismatch, and a task on the node runs on its
    own Python while the driver runs the cluster's. ``seen``: the interpreters of the driver
    and of a worker process on the node."""
    _ended(j, start)
    j.require(
        start.rc == 0,
        f"ray start at match level minor must succeed, exited {start.rc}: {start.log[-800:]}",
    )
    j.require(
        "Python patch version mismatch: The cluster was started with" in start.log,
        f"expected the patch mismatch warning, got: {start.log[-800:]}",
    )
    j.require(
        f"Python: {node_python}" in start.log,
        f"the warning must name Python {node_python}: {start.log[-800:]}",
    )
    j.require("Version mismatch: The cluster" not in start.log, "a warning, not the rejection")
    j.require(
        seen["remote"]["python"] == node_python,
        f"the task on the node must run on Python {node_python}: {seen}",
    )
    j.require(
        seen["driver"]["python"] == cluster_python,
        f"the driver must run on Python {cluster_python}: {seen}",
    )
    return (
        f"ray start on Python {node_python} joined with a warning; a task there ran on "
        f"{node_python}, the driver on {cluster_python}"
    )


@verdict("VER-03")
def other_release_driver_refused(
    j: Judging, error: RaisedError | None, value: Any, other: str
) -> str:
    """``ray.init`` from a driver of another Ray release (``other``) raises ``RuntimeError``
    naming the version mismatch. ``error``: what the driver's workload raised (None: it
    returned ``value``)."""
    raised = j.found(error, f"a {other} driver must not connect: {value}")
    j.require(raised.isinstance("RuntimeError"), f"expected a RuntimeError, got {raised}")
    j.require("Version mismatch" in raised.message, f"the error must name the mismatch: {raised}")
    j.require(f"Ray: {other}" in raised.message, f"the error must name Ray {other}: {raised}")
    return f"ray.init of a {other} driver raised RuntimeError: version mismatch"
