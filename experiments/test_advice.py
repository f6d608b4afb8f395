"""Runbook advice, tried exactly as written: ADVICE-01 … ADVICE-04.

Topology: a 4-CPU head and two 4-CPU workers, driver on the head, with the runbook's
``RAY_SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER=1`` on every node (ADVICE-04). A node booted with
the runbook's ``ray start`` options joins later through ``Cluster.add_node`` (ADVICE-01).
Workloads: ``workloads.advice`` and SCHED-02's ``workloads.scheduling:place_series``.
"""

from __future__ import annotations

import pytest

from chaos.testing import (
    Experiment,
    NodeSpec,
    poll,
    record,
)

from .test_scheduling import HYBRID, WORKERS_2X4, worker_counts

KNOB = "SCHEDULER_TASKS_USE_THROUGHPUT_SCHEDULER"
RUNBOOK_OPTIONS = ("--memory-monitor-interval-ms=100", "--raylet-death-on-oom=false")
#: The settings the OOM page names instead (ray-oom-prevention.html), as RayConfig spells them.
EXISTING_SETTINGS = ("memory_monitor_refresh_ms", "memory_usage_threshold")
#: A rejected CLI option ends `ray start` at once (observed 1-2.6 s).
REJECT_S = 60


@pytest.mark.claim("ADVICE-01", "ADVICE-02", "ADVICE-03", "ADVICE-04")
@pytest.mark.cluster(
    driver=False, head={"num_cpus": 4}, workers=WORKERS_2X4, env={f"RAY_{KNOB}": "1"}
)
def test_runbook_advice_is_rejected_or_changes_nothing(experiment: Experiment) -> None:
    """Unknown ``ray start`` options, ``ray.init(scheduling_strategy=)`` and
    ``submit_job(max_resources=)`` are rejected; the throughput-scheduler knob does not exist
    and placement is SCHED-02's with it set."""
    cluster = experiment.cluster

    # ADVICE-01: on the command line of a running node ...
    cli = cluster.run("workloads.advice:ray_start_options", options=list(RUNBOOK_OPTIONS)).result()
    record(experiment, "ADVICE-01 ray start", cli)
    for option in RUNBOOK_OPTIONS:
        flag = option.split("=")[0]
        assert cli["in_help"][flag] is False, f"{flag} must not be in ray start --help"
        assert cli[option]["rc"] == 2, cli[option]
        assert any(f"No such option '{flag}'" in line for line in cli[option]["output_tail"])
    # ... and as a new node's boot arguments: `ray start` exits 2, the node never joins.
    cluster.add_node(
        NodeSpec(name="adv", num_cpus=1, extra_args=RUNBOOK_OPTIONS, expect_join=False)
    )

    def exited() -> None:
        assert cluster.exec("adv", ["test", "-f", "/raychaos/state/ray-start.rc"]).exit_code == 0

    poll(exited, REJECT_S, period=1)
    rc = int(cluster.exec("adv", ["cat", "/raychaos/state/ray-start.rc"]).output.strip())
    log = cluster.exec("adv", ["tail", "-n", "6", "/raychaos/state/ray-start.log"]).output
    record(experiment, "ADVICE-01 boot log", log)
    assert rc == 2, log
    assert "No such option '--memory-monitor-interval-ms'" in log, log
    nodes = experiment.nemesis.state("nodes")
    assert cluster.node("adv").ip not in {r.get("node_ip") for r in nodes}
    # ... while the settings the docs name instead are in Ray's config table (RayConfig's
    # names are compiled into the raylet; the scan finds the control's the same way).
    for setting in EXISTING_SETTINGS:
        found = cluster.run("workloads.advice:knob_known", name=setting).result()
        record(experiment, f"ADVICE-01 {setting}", {k: v for k, v in found.items() if k != "knobs"})
        assert any(h.endswith("raylet/raylet") for h in found["hits"]), (
            f"RAY_{setting} (the OOM page's setting) must be a knob of the raylet: {found['hits']}"
        )
    experiment.held("ADVICE-01", "both options rejected (exit 2), both documented settings exist")

    # ADVICE-02: a global scheduling strategy.
    init = cluster.run("workloads.advice:init_with_strategy").result()
    record(experiment, "ADVICE-02", init)
    assert not init["accepted"] and init["error"]["type"] == "RuntimeError", init
    assert "Unknown keyword argument(s): scheduling_strategy" in init["error"]["message"]
    assert init["connected_after"] is False
    experiment.held("ADVICE-02", "ray.init rejected scheduling_strategy, nothing connected")

    # ADVICE-03: a per-job quota.
    quota = cluster.run("workloads.advice:submit_with_max_resources").result()
    record(experiment, "ADVICE-03", quota)
    assert not quota["accepted"] and quota["error"]["type"] == "TypeError", quota
    assert "unexpected keyword argument 'max_resources'" in quota["error"]["message"]
    assert "max_resources" not in quota["params"] and "entrypoint_resources" in quota["params"]
    experiment.held("ADVICE-03", "submit_job rejected max_resources")

    # ADVICE-04: the knob is in no Ray file (a known knob is, as a control) ...
    scan = cluster.run("workloads.advice:knob_known", name=KNOB).result()
    record(experiment, "ADVICE-04 scan", {k: v for k, v in scan.items() if k != "knobs"})
    assert scan["knobs"].get(f"RAY_{KNOB}") == "1", "the knob must reach the driver"
    assert scan["files_scanned"] > 1000 and scan["control_hits"], scan
    assert scan["hits"] == [], f"{KNOB} appears in Ray: {scan['hits']}"
    # ... and placement with it set is SCHED-02's.
    series = cluster.run(
        "workloads.scheduling:place_series", ns=sorted(HYBRID), strategy="DEFAULT", one_by_one=True
    ).result()
    record(experiment, "ADVICE-04 DEFAULT actors per node", {r["n"]: r["counts"] for r in series})
    for r in series:
        head, workers = HYBRID[r["n"]]
        assert (r["counts"]["head"], worker_counts(r["counts"])) == (head, workers), r
