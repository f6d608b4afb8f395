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

from .verdicts.advice import (
    EXISTING_SETTINGS,
    HYBRID,
    KNOB,
    RUNBOOK_OPTIONS,
    RunbookOptions,
    global_strategy_rejected,
    runbook_options_rejected,
    submit_job_refuses_max_resources,
    throughput_knob_changes_nothing,
)

#: SCHED-02's topology: two 4-CPU workers beside the 4-CPU head.
WORKERS_2X4 = [{"name": "worker", "count": 2, "num_cpus": 4}]
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
    registered = {r.get("node_ip") for r in experiment.nemesis.state("nodes")}
    # ... while the settings the docs name instead are in Ray's config table.
    settings: dict[str, list[str]] = {}
    for setting in EXISTING_SETTINGS:
        found = cluster.run("workloads.advice:knob_known", name=setting).result()
        record(experiment, f"ADVICE-01 {setting}", {k: v for k, v in found.items() if k != "knobs"})
        settings[setting] = found["hits"]
    options = RunbookOptions(cli, rc, log, cluster.node("adv").ip in registered, settings)
    experiment.judge(runbook_options_rejected(options))

    # ADVICE-02: a global scheduling strategy.
    init = cluster.run("workloads.advice:init_with_strategy").result()
    record(experiment, "ADVICE-02", init)
    experiment.judge(global_strategy_rejected(init))

    # ADVICE-03: a per-job quota.
    quota = cluster.run("workloads.advice:submit_with_max_resources").result()
    record(experiment, "ADVICE-03", quota)
    experiment.judge(submit_job_refuses_max_resources(quota))

    # ADVICE-04: the knob is in no Ray file (a known knob is, as a control) ...
    scan = cluster.run("workloads.advice:knob_known", name=KNOB).result()
    record(experiment, "ADVICE-04 scan", {k: v for k, v in scan.items() if k != "knobs"})
    # ... and placement with it set is SCHED-02's.
    series = cluster.run(
        "workloads.scheduling:place_series", ns=sorted(HYBRID), strategy="DEFAULT", one_by_one=True
    ).result()
    record(experiment, "ADVICE-04 DEFAULT actors per node", {r["n"]: r["counts"] for r in series})
    experiment.judge(throughput_knob_changes_nothing(scan, series))
