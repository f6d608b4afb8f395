"""The author's surface: everything an experiment needs, imported from one place.

An experiment — in this repository's ``experiments/`` or in a team's own — imports only from
here::

    from chaos.testing import Experiment, FAST_HEALTH_CHECKS, KILL_NODE, strike_on

What is here is stable across releases of raychaos; every other ``chaos`` module is internal
and may change (an import-linter contract keeps ``experiments/`` on this surface). It
gathers the fixture's :class:`Experiment`, the cluster and its nodes, faults and the nemesis,
the seeded schedule and churn, the checks (``chaos.check``'s whole public API), bounded
waits, the history's kinds, knob presets and the exception tree, findings included.
"""

from __future__ import annotations

from chaos import labels
from chaos.backends.docker.images import (
    ImageBuilder,
)
from chaos.bench import python_patch
from chaos.check import (
    AFTER_DEATH_S,
    DEATH_REASON,
    EXPECTATIONS,
    FAST_HEALTH_CHECKS,
    GCS_RECONNECT,
    GCS_RECONNECT_S,
    HEALTH_CHECK_DEFAULTS,
    KILL_NODE,
    KILL_PROCESS,
    KILL_RAYLET,
    LINEAGE_EVICTED,
    MAX_ATTEMPTS_EXCEEDED,
    MISSED_HEARTBEATS,
    OBSERVER_SLACK_S,
    PRESETS,
    RETRIES_DISABLED,
    STOP_RAY,
    Band,
    Expectation,
    Judging,
    Measured,
    NotChecked,
    Strike,
    Verdict,
    WithHistory,
    absent_reason,
    actor_states,
    applies,
    at_least,
    attach,
    attempts,
    await_dead,
    dead_in_band,
    death_cause,
    expectation,
    expected,
    fault_to_actor_alive,
    fault_to_event,
    fault_to_node_dead,
    first,
    first_logged,
    health_check_knob,
    injected,
    logged_at,
    lost_object_error,
    node_dead_event,
    node_death_band,
    record,
    rows_of,
    since,
    skew_partner,
    status_now,
    stays_dead,
    strike_on,
    unobservable_window,
    verdict,
    victim_node,
    victim_pid,
)
from chaos.check.expectations import (
    CORE_WORKER_RECONNECT_TIMEOUT_S,
    RAYLET_RECONNECT_TIMEOUT_S,
)
from chaos.cluster.autoscaler import (
    launches,
    refusals,
    removals,
    wishes,
)
from chaos.cluster.cluster import (
    Cluster,
)
from chaos.cluster.node import (
    Node,
)
from chaos.cluster.readiness import (
    START_RETRIES,
)
from chaos.errors import (
    ChaosError,
    CheckFailed,
    FaultNotObserved,
    Finding,
    Intermittent,
    MissingEvidence,
    ObserverGap,
    PythonPatchUnavailable,
    RaceLost,
    RayCrashed,
    WorkloadError,
    WorkloadTimeout,
)
from chaos.experiment import (
    Experiment,
    KillerRun,
    run_experiment,
    under_killer,
)
from chaos.history import (
    Kind,
    Source,
)
from chaos.nemesis import (
    Fault,
    Nemesis,
)
from chaos.nemesis.base import (
    sh,
)
from chaos.nemesis.churn import (
    RPC_PROBE,
    RPC_PROBE_S,
    Churn,
)
from chaos.nemesis.drain import (
    GRACEFUL_DRAIN_ENV,
    IDLE_TERMINATION,
    PREEMPTED_MESSAGE,
    SIGTERM_MESSAGE,
    request_drain,
)
from chaos.nemesis.process import (
    monitor_pids,
    still_running,
)
from chaos.plugin.factory import (
    ClusterFactory,
)
from chaos.plugin.settings import (
    Settings,
)
from chaos.report.timeline import (
    write_evidence,
)
from chaos.spec import (
    ClusterSpec,
    NodeSpec,
)
from chaos.spec.knobs import (
    FAST_GCS_CONNECT,
    FAST_GRPC_KEEPALIVE,
)
from chaos.spec.plan import (
    GCS_PORT,
    RAY_LOGS,
)
from chaos.spec.rpc_failures import (
    Mode,
    RpcFailure,
)
from chaos.spec.schedule import (
    Schedule,
)
from chaos.waits import (
    holds_for,
    poll,
    wait_until,
)
from chaos.workload.run import (
    WorkloadRun,
)

__all__ = [
    "AFTER_DEATH_S",
    "CORE_WORKER_RECONNECT_TIMEOUT_S",
    "DEATH_REASON",
    "EXPECTATIONS",
    "FAST_GCS_CONNECT",
    "FAST_GRPC_KEEPALIVE",
    "FAST_HEALTH_CHECKS",
    "GCS_PORT",
    "GCS_RECONNECT",
    "GCS_RECONNECT_S",
    "GRACEFUL_DRAIN_ENV",
    "HEALTH_CHECK_DEFAULTS",
    "IDLE_TERMINATION",
    "KILL_NODE",
    "KILL_PROCESS",
    "KILL_RAYLET",
    "LINEAGE_EVICTED",
    "MAX_ATTEMPTS_EXCEEDED",
    "MISSED_HEARTBEATS",
    "OBSERVER_SLACK_S",
    "PREEMPTED_MESSAGE",
    "PRESETS",
    "RAYLET_RECONNECT_TIMEOUT_S",
    "RAY_LOGS",
    "RETRIES_DISABLED",
    "RPC_PROBE",
    "RPC_PROBE_S",
    "SIGTERM_MESSAGE",
    "START_RETRIES",
    "STOP_RAY",
    "Band",
    "ChaosError",
    "CheckFailed",
    "Churn",
    "Cluster",
    "ClusterFactory",
    "ClusterSpec",
    "Expectation",
    "Experiment",
    "Fault",
    "FaultNotObserved",
    "Finding",
    "ImageBuilder",
    "Intermittent",
    "Judging",
    "KillerRun",
    "Kind",
    "Measured",
    "MissingEvidence",
    "Mode",
    "Nemesis",
    "Node",
    "NodeSpec",
    "NotChecked",
    "ObserverGap",
    "PythonPatchUnavailable",
    "RaceLost",
    "RayCrashed",
    "RpcFailure",
    "Schedule",
    "Settings",
    "Source",
    "Strike",
    "Verdict",
    "WithHistory",
    "WorkloadError",
    "WorkloadRun",
    "WorkloadTimeout",
    "absent_reason",
    "actor_states",
    "applies",
    "at_least",
    "attach",
    "attempts",
    "await_dead",
    "dead_in_band",
    "death_cause",
    "expectation",
    "expected",
    "fault_to_actor_alive",
    "fault_to_event",
    "fault_to_node_dead",
    "first",
    "first_logged",
    "health_check_knob",
    "holds_for",
    "injected",
    "labels",
    "launches",
    "logged_at",
    "lost_object_error",
    "monitor_pids",
    "node_dead_event",
    "node_death_band",
    "poll",
    "python_patch",
    "record",
    "refusals",
    "removals",
    "request_drain",
    "rows_of",
    "run_experiment",
    "sh",
    "since",
    "skew_partner",
    "status_now",
    "stays_dead",
    "still_running",
    "strike_on",
    "under_killer",
    "unobservable_window",
    "verdict",
    "victim_node",
    "victim_pid",
    "wait_until",
    "wishes",
    "write_evidence",
]
