"""Ray Serve's health checks and deployments that cannot start (docs: serve/production-guide/
fault-tolerance, serve/advanced-guides/deployment-graphs… "Replica health-checking"):
SERVE-02 failing ``check_health``, SERVE-08 a ``check_health`` that never returns, SERVE-07 a
raising constructor, a failing import path, a replica that waits for resources. The verdicts:
``verdicts.serve_health``.
"""

from __future__ import annotations

import pytest

from chaos.testing import Experiment, WorkloadError, record

from .serving import (
    JITTER,
    NEEDS_SERVE,
    PERIOD_S,
    START_S,
    WORKERS_2,
    first_alive,
    node_name,
    shutdown_serve,
)
from .verdicts.serve_health import (
    HealthRounds,
    HungChecks,
    failing_checks,
    hang_band,
    hung_check_times_out,
    start_failures,
)

pytestmark = [NEEDS_SERVE]

#: SERVE-08's ``health_check_timeout_s`` (Serve's default: 30 s): over the check period with
#: its jitter (``JITTER × PERIOD_S``), so the next check is sent as soon as one times out.
HANG_TIMEOUT_S = 2.0

#: Serve's slow-start warning after this many seconds (defaults 30 s), for SERVE-07.
SLOW_S = 5
START_ENV = {
    "RAY_SERVE_SLOW_STARTUP_WARNING_S": str(SLOW_S),
    "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": str(SLOW_S),
}


def check_log(experiment: Experiment, node: str, path: str) -> list[tuple[float, str]]:
    """The replica's own log of its checks: (time, ok | fail | hang)."""
    out = experiment.cluster.exec(node, ["cat", path], timeout=30)
    if out.exit_code != 0:
        raise WorkloadError(f"the replica's check log {path} on {node}: {out.output[-300:]}")
    rows = [line.split() for line in out.output.splitlines() if line.strip()]
    return [(float(t), outcome) for t, outcome in rows]


def read_checks(experiment: Experiment, node: str, path: str) -> list[tuple[float, bool]]:
    """The replica's own log of its checks: (time, passed)."""
    return [(t, outcome == "ok") for t, outcome in check_log(experiment, node, path)]


def hung_checks(experiment: Experiment) -> HungChecks:
    """SERVE-08's run: the patient replica's checks hang until it is replaced; the record."""
    cluster = experiment.cluster
    seen = cluster.run(
        "workloads.serve_health:hang_round",
        period_s=PERIOD_S,
        timeout_s=HANG_TIMEOUT_S,
        num_cpus=0.5,
        timeout=300,
    ).result()
    record(experiment, "SERVE-08 the hang round", seen)
    old = seen["before"]
    lines = {
        what: cluster.run(
            f"workloads.serve:{what}",
            node=cluster.head.name,
            replica_id=old["replica_id"],
            timeout=60,
        ).result()
        for what in ("unhealthy_verdicts", "timed_out_checks")
    }
    record(experiment, "SERVE-08 the controller's lines", lines)
    return HungChecks(
        hung_at=seen["hung_at"],
        checks=check_log(experiment, node_name(experiment, old["node_id"]), old["log"]),
        timeouts=lines["timed_out_checks"],
        verdicts=lines["unhealthy_verdicts"],
        answered_while_hung=seen["answered_while_hung"],
        replaced=bool(seen["replaced"]),
        new_alive=first_alive(
            experiment, "ServeReplica:patient:Patient", seen["hung_at"], {old["actor_id"]}
        ),
    )


@pytest.mark.claim("SERVE-02", "SERVE-08", "SERVE-07")
@pytest.mark.cluster(driver=False, env=START_ENV, head={"num_cpus": 0}, workers=WORKERS_2)
def test_failing_health_checks_and_deployments_that_cannot_start(experiment: Experiment) -> None:
    """SERVE-02: a replica's ``check_health`` failing once, or every other time, replaces
    nothing; failing every time replaces it after exactly the threshold in a row. SERVE-08: a
    check that never returns fails at its timeout, the threshold of them in a row replace the
    replica inside the band the period and timeout imply. SERVE-07: a
    raising constructor ends DEPLOY_FAILED with its exception after the documented number of
    starts and no more; a failing import path ends DEPLOY_FAILED with the traceback; a replica
    asking for a resource no node has stays UPDATING with the slow-start message."""
    cluster = experiment.cluster
    deployed = cluster.run(
        "workloads.serve_health:deploy_patient",
        health_check_period_s=PERIOD_S,
        num_cpus=0.5,
        timeout=300,
    ).result()
    constants = deployed["constants"]
    experiment.measure("Serve constants in the image", constants)
    threshold = int(constants["REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD"])
    rounds = cluster.run(
        "workloads.serve_health:health_rounds", period_s=PERIOD_S, timeout=400
    ).result()
    always = rounds["always"]
    old = always["before"]  # the always-failing replica (replaced or not: the verdict says)
    # The controller's own verdict, from its log on the head: the replica's failures are judged
    # against the moment it was given, not against every check the replica ran.
    verdicts = cluster.run(
        "workloads.serve:unhealthy_verdicts",
        node=cluster.head.name,
        replica_id=old["replica_id"],
        timeout=60,
    ).result()
    record(experiment, "SERVE-02 the controller's unhealthy verdicts", verdicts)
    seen = HealthRounds(
        rounds=rounds,
        checks=read_checks(experiment, node_name(experiment, old["node_id"]), old["log"]),
        verdicts=verdicts,
        new_alive=first_alive(
            experiment, "ServeReplica:patient:Patient", always["set_at"], {old["actor_id"]}
        ),
    )
    bound = threshold * JITTER * PERIOD_S + START_S
    experiment.judge(failing_checks(seen, threshold, bound))
    band = hang_band(threshold, PERIOD_S, HANG_TIMEOUT_S, JITTER)
    experiment.judge(hung_check_times_out(hung_checks(experiment), threshold, HANG_TIMEOUT_S, band))

    started = cluster.run(
        "workloads.serve_health:start_failures",
        dashboard=cluster.dashboard_url,
        slow_s=SLOW_S,
        timeout=900,
    ).result()
    record(experiment, "SERVE-07 what serve.status() said", started)
    experiment.judge(start_failures(started, constants))
    shutdown_serve(experiment)
