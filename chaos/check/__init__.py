"""The checker role: what an experiment asserts about Ray, and the evidence it records.

Everything a chaos experiment needs to judge an outcome, importable by any suite::

    from chaos.check import FAST_HEALTH_CHECKS, KILL_NODE, dead_in_band, since, strike_on

- :mod:`~chaos.spec.knobs` (re-exported here): the knob presets experiments (and topologies,
  by name) run with.
- :mod:`~chaos.check.bands`: the death band those knobs imply.
- :mod:`~chaos.check.windows`: seconds from a fault to an outcome, read from the history.
- :mod:`~chaos.check.strikes`: faults aimed by a workload's event (:data:`KILL_NODE` …).
- :mod:`~chaos.check.deaths`: a node is DEAD within the band, and stays DEAD.
- :mod:`~chaos.check.states`: State API rows reduced to what an assertion compares.
- :mod:`~chaos.check.logs`, :mod:`~chaos.check.versions`: Ray's log clocks and releases.
- :mod:`~chaos.check.expectations`: what differs by Ray release (first release, evidence).
- :mod:`~chaos.check.attachments`: ``ray status`` and measurements in the report.
- :mod:`~chaos.check.verdicts`: verdicts as pure functions over what a run recorded.
"""

from chaos.check.attachments import attach, record, status_now
from chaos.check.bands import (
    HEALTH_CHECK_DEFAULTS,
    OBSERVER_SLACK_S,
    Band,
    health_check_knob,
    node_death_band,
)
from chaos.check.deaths import (
    DEATH_REASON,
    MISSED_HEARTBEATS,
    await_dead,
    dead_in_band,
    stays_dead,
)
from chaos.check.expectations import (
    EXPECTATIONS,
    LINEAGE_EVICTED,
    MAX_ATTEMPTS_EXCEEDED,
    RETRIES_DISABLED,
    Expectation,
    NotChecked,
    absent_reason,
    applies,
    expectation,
    expected,
    lost_object_error,
)
from chaos.check.logs import first_logged, logged_at
from chaos.check.states import actor_states, attempts, death_cause
from chaos.check.strikes import (
    KILL_NODE,
    KILL_PROCESS,
    KILL_RAYLET,
    STOP_RAY,
    Strike,
    strike_on,
    victim_node,
    victim_pid,
)
from chaos.check.verdicts import Judging, Measured, Verdict, rows_of, verdict
from chaos.check.versions import at_least, skew_partner
from chaos.check.windows import (
    WithHistory,
    fault_to_actor_alive,
    fault_to_event,
    fault_to_node_dead,
    first,
    injected,
    node_dead_event,
    since,
    unobservable_window,
)
from chaos.spec.knobs import (
    AFTER_DEATH_S,
    FAST_HEALTH_CHECKS,
    GCS_RECONNECT,
    GCS_RECONNECT_S,
    PRESETS,
)

__all__ = [
    "AFTER_DEATH_S",
    "DEATH_REASON",
    "EXPECTATIONS",
    "FAST_HEALTH_CHECKS",
    "GCS_RECONNECT",
    "GCS_RECONNECT_S",
    "HEALTH_CHECK_DEFAULTS",
    "KILL_NODE",
    "KILL_PROCESS",
    "KILL_RAYLET",
    "LINEAGE_EVICTED",
    "MAX_ATTEMPTS_EXCEEDED",
    "MISSED_HEARTBEATS",
    "OBSERVER_SLACK_S",
    "PRESETS",
    "RETRIES_DISABLED",
    "STOP_RAY",
    "Band",
    "Expectation",
    "Judging",
    "Measured",
    "NotChecked",
    "Strike",
    "Verdict",
    "WithHistory",
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
    "injected",
    "logged_at",
    "lost_object_error",
    "node_dead_event",
    "node_death_band",
    "record",
    "rows_of",
    "since",
    "skew_partner",
    "status_now",
    "stays_dead",
    "strike_on",
    "unobservable_window",
    "verdict",
    "victim_node",
    "victim_pid",
]
