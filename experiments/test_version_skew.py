"""Version skew (Ray: ``check_version_info``): VER-01, VER-03.

A worker image of another Ray release (the "previous release" of CLAIMS.md for the default
2.60.0, and 2.60.0 when the suite runs on 2.59.0) joins, or drives, the cluster.
"""

from __future__ import annotations

import datetime as dt

import pytest

from chaos.cluster import GCS_PORT, Cluster
from chaos.nemesis import poll
from chaos.settings import Settings
from chaos.spec import NodeSpec

#: Each Ray release under test, and the one it is skewed against.
OTHER = {"2.60.0": "2.59.0", "2.59.0": "2.60.0"}
#: `ray start` of a mismatched worker must give up "within seconds".
REJECT_WITHIN_S = 60


@pytest.fixture
def skewed(ray_cluster_factory, raychaos_settings: Settings) -> tuple[Cluster, str]:  # type: ignore[no-untyped-def]
    other = OTHER.get(raychaos_settings.ray_version, "2.59.0")
    cluster = ray_cluster_factory(
        workers=(
            NodeSpec(name="worker", count=1),
            NodeSpec(name="skewed", ray_version=other, expect_join=False),
        ),
    )
    return cluster, other


def _started_at(cluster: Cluster, node: str) -> float:
    container = cluster.node(node).container
    container.reload()
    raw = container.attrs["State"]["StartedAt"][:26].rstrip("Z")
    return dt.datetime.fromisoformat(raw).replace(tzinfo=dt.UTC).timestamp()


@pytest.mark.claim("VER-01", "PEND-03")
def test_worker_of_another_release_is_rejected_and_never_registers(
    skewed: tuple[Cluster, str],
) -> None:
    """`ray start` of a worker with another Ray release exits non-zero with the mismatch text."""
    cluster, other = skewed

    def exited() -> None:
        assert cluster.exec("skewed", ["test", "-f", "/raychaos/state/ray-start.rc"]).exit_code == 0

    poll(exited, REJECT_WITHIN_S)
    rc = int(cluster.exec("skewed", ["cat", "/raychaos/state/ray-start.rc"]).output.strip())
    log = cluster.exec("skewed", ["cat", "/raychaos/state/ray-start.log"]).output
    mtime = float(
        cluster.exec("skewed", ["stat", "-c", "%Y", "/raychaos/state/ray-start.rc"]).output
    )
    took = mtime - _started_at(cluster, "skewed")
    cluster.history.record("checker", "measurement", name="ray start → exit (s)", value=took)
    assert rc != 0, f"ray start of a {other} worker must fail, exited {rc}"
    assert "Version mismatch" in log, f"expected the mismatch text, got: {log[-800:]}"
    assert "The cluster was started with" in log
    assert took <= REJECT_WITHIN_S
    nodes = cluster.exec(
        cluster.driver.name,
        ["python", "-m", "raychaos_agent.state", "nodes", cluster.dashboard_url],
    ).output
    assert cluster.node("skewed").ip not in nodes, "the skewed node must never register"
    status = cluster.ray_status()
    assert cluster.node("skewed").ip not in status, "ray status must not count the skewed node"
    total_cpu = sum(1 for _ in ("head", "worker"))  # 1 CPU each; the skewed node's CPU is absent
    assert f"0.0/{total_cpu}.0 CPU" in status or f"/{total_cpu}.0 CPU" in status, status


def other_release_venv(cluster: Cluster, source: str, target: str, path: str) -> str:
    """Copy the venv of ``source`` (another Ray release) into ``target``; return its python.

    A driver needs a raylet on its own host, so the skewed driver runs on the driver node with
    the other release's interpreter, exactly as a user with a mismatched venv would.
    """
    stream, _ = cluster.node(source).container.get_archive("/opt/ray")
    client = cluster.client.api
    assert client.put_archive(str(cluster.node(target).container.id), "/tmp", stream)
    assert cluster.exec(target, ["mv", "/tmp/ray", path]).exit_code == 0
    return f"{path}/bin/python"


@pytest.mark.claim("VER-03")
def test_driver_of_another_release_cannot_connect(skewed: tuple[Cluster, str]) -> None:
    """`ray.init` from another Ray release raises RuntimeError naming the version mismatch."""
    cluster, other = skewed
    python = other_release_venv(cluster, "skewed", cluster.driver.name, "/opt/ray-other")
    version = cluster.exec(
        cluster.driver.name, [python, "-c", "import ray; print(ray.__version__)"]
    )
    assert version.output.strip() == other
    run = cluster.run(
        "workloads.version:connect",
        address=f"{cluster.head.ip}:{GCS_PORT}",
        python=python,
        timeout=120,
    )
    outcome = run.outcome()
    assert outcome.error is not None, f"a {other} driver must not connect: {outcome.value}"
    assert outcome.error.isinstance("RuntimeError"), str(outcome.error)
    assert "Version mismatch" in outcome.error.message
    assert f"Ray: {other}" in outcome.error.message
