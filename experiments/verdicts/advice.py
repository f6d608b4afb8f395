"""ADVICE-01 … ADVICE-04 as pure verdicts: runbook advice, tried exactly as written, is rejected
or changes nothing.

The records (``workloads.advice``): ``ray start`` given each runbook option on a running node
(whether ``--help`` lists it, its exit code and last output lines), then a new node booted with
them (its ``ray start``'s exit code and log, and whether its address registered), and the
files of the installed Ray naming each setting the OOM page names instead (ADVICE-01);
``ray.init(scheduling_strategy=)``'s outcome (ADVICE-02); ``submit_job(max_resources=)``'s and
the method's parameters (ADVICE-03); a scan of Ray's files for the throughput-scheduler knob,
with a known knob as its control, and where DEFAULT placed actors with the knob set
(``workloads.scheduling:place_series``, ADVICE-04).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.testing import Judging, verdict

from .scheduling import worker_counts

#: ADVICE-04's knob, set on every node as the runbook says (``RAY_`` + it).
KNOB = "SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER"
#: ADVICE-01's ``ray start`` options, as the runbook writes them.
RUNBOOK_OPTIONS = ("--memory-monitor-interval-ms=100", "--raylet-death-on-oom=false")
#: The settings the OOM page names instead (ray-oom-prevention.html), as RayConfig spells them.
EXISTING_SETTINGS = ("memory_monitor_refresh_ms", "memory_usage_threshold")
#: SCHED-02's placement of DEFAULT actors, by count: the head's, then the workers' sorted
#: (measured on 2.60 and 2.59). A copy of test_scheduling.py's HYBRID, which test_advice.py
#: may not import, until verdicts/scheduling.py holds it. Actors are placed one by one: the
#: policy, not the lag of the raylets' resource reports (``workloads.scheduling.place``).
HYBRID = {2: (2, [0, 0]), 4: (2, [0, 2]), 6: (2, [2, 2]), 12: (4, [4, 4])}
#: A scan of Ray's files, not of a handful: 2.60 has 2658 and 2.59 2625 (measured).
FILES_IN_RAY = 1000

Seen = Mapping[str, Any]


def _flag(option: str) -> str:
    return option.split("=")[0]


@dataclass(frozen=True)
class RunbookOptions:
    """ADVICE-01's record: ``cli``, ``ray start`` given each option on a running node (the
    ``in_help`` of each flag, and per option its ``rc`` and ``output_tail``); the node booted
    with both options (its ``ray start``'s exit code, its log's last lines, and whether its
    address was among the registered nodes'); and, per setting the docs name instead, the
    files of the installed Ray that contain it."""

    cli: Seen
    boot_rc: int
    boot_log: str
    boot_registered: bool
    settings: Mapping[str, Sequence[str]]


@verdict("ADVICE-01")
def runbook_options_rejected(j: Judging, run: RunbookOptions) -> str:
    """The runbook's ``ray start`` options do not exist: ``--help`` lists neither, each ends
    ``ray start`` with click's usage error (exit 2, "No such option"), on the command line and
    as a node's boot arguments (that node never registers); the settings the OOM page names
    instead are knobs of the raylet."""
    for option in RUNBOOK_OPTIONS:
        flag, tried = _flag(option), run.cli[option]
        j.require(run.cli["in_help"][flag] is False, f"{flag} must not be in ray start --help")
        j.require(tried["rc"] == 2, f"ray start {option} must exit 2 (a usage error): {tried}")
        j.require(
            any(f"No such option '{flag}'" in line for line in tried["output_tail"]),
            f"ray start {option} must say 'No such option': {tried['output_tail']}",
        )
    j.require(run.boot_rc == 2, f"the node's ray start must exit 2: {run.boot_rc}, {run.boot_log}")
    # click stops at the first unknown option.
    first = _flag(RUNBOOK_OPTIONS[0])
    j.require(
        f"No such option '{first}'" in run.boot_log,
        f"the node's ray start must reject {first}: {run.boot_log}",
    )
    j.require(not run.boot_registered, "the node booted with the options must never register")
    # RayConfig's names are compiled into the raylet; the scan finds the control's the same way.
    for setting in EXISTING_SETTINGS:
        hits = run.settings[setting]
        j.require(
            any(h.endswith("raylet/raylet") for h in hits),
            f"RAY_{setting} (the OOM page's setting) must be a knob of the raylet: {list(hits)}",
        )
    return "both options rejected (exit 2), both documented settings exist"


@verdict("ADVICE-02")
def global_strategy_rejected(j: Judging, init: Seen) -> str:
    """``ray.init(scheduling_strategy=…)``, a global default strategy, is rejected (a
    ``RuntimeError`` naming the argument) and leaves nothing connected."""
    error = init.get("error") or {}
    j.require(
        not init["accepted"] and error.get("type") == "RuntimeError",
        f"ray.init(scheduling_strategy=) must raise RuntimeError: {init}",
    )
    j.require(
        "Unknown keyword argument(s): scheduling_strategy" in error["message"],
        f"the error must name scheduling_strategy: {error}",
    )
    j.require(init["connected_after"] is False, f"nothing may stay connected: {init}")
    return "ray.init rejected scheduling_strategy, nothing connected"


@verdict("ADVICE-03")
def submit_job_refuses_max_resources(j: Judging, quota: Seen) -> str:
    """``submit_job(max_resources=…)``, a per-job quota, is rejected: a ``TypeError`` for an
    unexpected keyword argument, and the method has no such parameter (it has
    ``entrypoint_resources``)."""
    error = quota.get("error") or {}
    j.require(
        not quota["accepted"] and error.get("type") == "TypeError",
        f"submit_job(max_resources=) must raise TypeError: {quota}",
    )
    j.require(
        "unexpected keyword argument 'max_resources'" in error["message"],
        f"the TypeError must name max_resources: {error}",
    )
    params = quota["params"]
    j.require(
        "max_resources" not in params and "entrypoint_resources" in params,
        f"submit_job's parameters: {params}",
    )
    return "submit_job rejected max_resources"


@verdict("ADVICE-04")
def throughput_knob_changes_nothing(j: Judging, scan: Seen, series: Sequence[Seen]) -> str:
    """``RAY_SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER`` is no knob: it reached the driver, yet
    no file of Ray names it (a known knob is found, as a control), and DEFAULT places actors
    with it set exactly as SCHED-02 does without it (:data:`HYBRID`). ``scan``: the scan's
    report; ``series``: each count's actors per node."""
    j.require(
        scan["knobs"].get(f"RAY_{KNOB}") == "1", f"the knob must reach the driver: {scan['knobs']}"
    )
    j.require(
        scan["files_scanned"] > FILES_IN_RAY and bool(scan["control_hits"]),
        f"the scan must cover Ray and find the control: {scan['files_scanned']} files, "
        f"control in {scan['control_hits']}",
    )
    j.require(scan["hits"] == [], f"{KNOB} appears in Ray: {scan['hits']}")
    for r in series:
        head, workers = HYBRID[r["n"]]
        j.require(
            (r["counts"]["head"], worker_counts(r["counts"])) == (head, workers),
            f"n={r['n']}: placed {r['counts']} with the knob set, SCHED-02 places head {head}, "
            f"workers {workers}",
        )
    return (
        f"no file of {scan['files_scanned']} names the knob (the control found); DEFAULT placed "
        f"{len(series)} series as SCHED-02"
    )
