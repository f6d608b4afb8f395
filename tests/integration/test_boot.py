"""Boot real clusters, run workloads inside them, and leave nothing behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import docker
import pytest
from _procs import hanging, pytest_process, reapers_of, wait_booted
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos.backends.docker import docker_backend
from chaos.backends.docker.backend import DockerBackend
from chaos.backends.docker.images import ImageBuilder
from chaos.cluster.cluster import Cluster
from chaos.cluster.readiness import DEFAULT_CPU_SHARES, START_RETRIES
from chaos.errors import ClusterBootTimeout, WorkloadError
from chaos.labels import RunIdentity
from chaos.spec.topology import ClusterSpec, NodeSpec

ROOT = Path(__file__).resolve().parents[2]


def ours(client: docker.DockerClient, run_id: str) -> list[str]:
    selector: dict[str, str | list[str] | bool] = {"label": f"raychaos.run={run_id}"}
    return (
        [
            f"container {c.name}"
            for c in client.containers.list(all=True, ignore_removed=True, filters=selector)
        ]
        + [f"network {n.name}" for n in client.networks.list(filters=selector)]
        + [f"volume {v.name}" for v in client.volumes.list(filters=selector)]
    )


@pytest.mark.cluster(workers=2)
def test_three_pinned_tasks_run_on_three_distinct_nodes(ray_cluster: Cluster) -> None:
    names = ["head", "worker-1", "worker-2"]
    run = ray_cluster.run("workloads.basics:node_ids_of_pinned_tasks", nodes=names, timeout=120)
    placed = run.result()
    assert len(set(placed.values())) == 3
    assert placed == {n: ray_cluster.node(n).node_id for n in names}
    driver_event = run.wait_for("driver_connected", timeout=5)[0]
    assert driver_event.get("driver_node") == ray_cluster.node("driver").node_id
    # Every node has the limits the spec asked for.
    backend = ray_cluster.backend
    assert isinstance(backend, DockerBackend)
    worker = backend.containers["worker-1"]
    worker.reload()
    host_config = worker.attrs["HostConfig"]
    assert host_config["Memory"] == 2 * 1024**3
    assert host_config["ShmSize"] >= 100 * 1024**2
    assert host_config["PortBindings"] in (None, {})
    assert host_config["Init"] is True
    # The boot's CPU weight (boot_priority) is given back once the nodes are ALIVE.
    assert host_config["CpuShares"] == DEFAULT_CPU_SHARES


def test_pid_1_is_not_ray_start_so_a_raylet_can_die_alone(ray_cluster: Cluster) -> None:
    pid1 = ray_cluster.exec("worker-1", ["ps", "-o", "comm=", "-p", "1"]).output.strip()
    assert pid1 == "docker-init"
    kill = ray_cluster.exec("worker-1", ["pkill", "-9", "-x", "raylet"])
    assert kill.exit_code == 0
    for attempt in Retrying(stop=stop_after_delay(15), wait=wait_fixed(0.5), reraise=True):
        with attempt:
            assert ray_cluster.exec("worker-1", ["pgrep", "-x", "raylet"]).exit_code == 1
    assert ray_cluster.backend.state("worker-1") == "running", "the host outlives its raylet"


def test_a_node_that_cannot_start_fails_the_boot_fast_with_its_log(
    docker_client: docker.DockerClient, image_builder: ImageBuilder, raychaos_identity: RunIdentity
) -> None:
    spec = ClusterSpec(
        workers=(NodeSpec(name="worker", extra_args=("--no-such-flag",)),), boot_timeout_s=120
    )
    backend = docker_backend(
        spec.name,
        client=docker_client,
        builder=image_builder,
        identity=raychaos_identity,
        tag="bad",
    )
    cluster = Cluster(spec, backend)
    with pytest.raises(ClusterBootTimeout) as info, cluster:
        pass
    failed_at = time.time()
    text = str(info.value)
    print(text)
    # Timed from the boot slot (queueing behind another worker's boots is not booting; CI saw
    # 130 s from the call), and the error is the fast path's, not the timeout's.
    booting = failed_at - cluster.history.events("boot_slot")[0].t
    assert booting < 0.75 * spec.boot_timeout_s, f"the failed start was seen after {booting:.0f} s"
    assert "not all nodes ALIVE after" not in text, text
    assert "worker (" in text and "ray start exited with 2" in text
    retried = cluster.history.events("node_start_retried")
    assert [e.get("attempt") for e in retried] == list(range(1, START_RETRIES + 1)), retried
    assert "no-such-flag" in text, "the failed node's last log lines are in the error"
    assert "--- ray status ---" in text
    assert ours(docker_client, raychaos_identity.run_id) == [] or all(
        backend.key not in o for o in ours(docker_client, raychaos_identity.run_id)
    ), "a failed start tears down what it created"


def test_bad_workload_target_is_a_clear_harness_error(ray_cluster: Cluster) -> None:
    with pytest.raises(WorkloadError, match="MODULE:FUNCTION"):
        ray_cluster.run("workloads.basics.no_colon")
    run = ray_cluster.run("workloads.basics:no_such_function", timeout=60)
    with pytest.raises(WorkloadError, match="could not be started"):
        run.outcome()


FAILING = """
import pytest

@pytest.mark.cluster(workers=1, driver=False)
def test_fails(ray_cluster):
    assert ray_cluster.head.node_id
    raise AssertionError("boom")
"""


def test_a_failing_test_leaves_nothing_behind(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    pytester.makepyfile(test_fail=FAILING)
    pytester.mkdir("experiments")
    (pytester.path / "experiments" / "workloads").symlink_to(ROOT / "experiments" / "workloads")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    run_id = next(
        line.split()[2].rstrip(",") for line in result.outlines if line.startswith("raychaos: run ")
    )
    assert ours(docker_client, run_id) == []


def test_a_sigkilled_run_is_swept_by_the_next(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    """The net under the reaper: when the reaper dies too (a CI job's whole cgroup killed),
    the next run that uses raychaos removes what the dead run left."""
    marker = pytester.path / "booted"
    pytester.makepyfile(test_hang=hanging(marker, experiment=False))
    log = pytester.path / "pytest.out"
    with log.open("w") as out:
        proc = pytest_process([str(pytester.path / "test_hang.py")], pytester.path, out)
    try:
        key = wait_booted(marker, proc, log)["key"]
        reapers = reapers_of(proc.pid)
        assert reapers, "the run's reaper must be found (and stopped) first"
        for reaper in reapers:  # first, or it removes the cluster itself
            os.kill(reaper, signal.SIGKILL)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    left = docker_client.containers.list(
        all=True, ignore_removed=True, filters={"label": f"raychaos.cluster={key}"}
    )
    assert left, "SIGKILL skips teardown and the reaper is gone, so the cluster is still there"
    # The next run that uses raychaos (its Docker client) sweeps what the dead one left.
    pytester.makepyfile(test_ok="def test_ok(docker_client): pass")
    result = pytester.runpytest_subprocess("test_ok.py")
    result.assert_outcomes(passed=1)
    result.stderr.fnmatch_lines(["raychaos: sweep removed * leftover object(s)*"])
    assert (
        docker_client.containers.list(
            all=True, ignore_removed=True, filters={"label": f"raychaos.cluster={key}"}
        )
        == []
    )
    assert docker_client.networks.list(filters={"label": f"raychaos.cluster={key}"}) == []


BOOTED_AHEAD = """
import pytest
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos.plugin.boot_ahead import BOOT_AHEAD

@pytest.fixture
def skipper():
    pytest.skip("skipped at set-up, after its cluster was booted ahead")

@pytest.mark.cluster(workers=1, driver=False)
def test_first(ray_cluster):
    assert ray_cluster.head.node_id
    # A body as long as the next cluster's boot: it is booting now, in the background.
    ahead = BOOT_AHEAD.pending
    assert ahead is not None and "test_second" in ahead.nodeid
    for attempt in Retrying(stop=stop_after_delay(240), wait=wait_fixed(0.5), reraise=True):
        with attempt:
            assert not ahead.thread.is_alive()
    assert ahead.error is None, ahead.error

@pytest.mark.cluster(workers=1, driver=False)
def test_second(ray_cluster):
    assert ray_cluster.head.node_id

@pytest.mark.cluster(workers=1, driver=False)
def test_third(skipper, ray_cluster):
    raise AssertionError("never reached")
"""


def test_the_next_tests_cluster_boots_ahead_and_an_unused_one_is_removed(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    """test_second takes the cluster booted while test_first ran; the one booted for
    test_third (skipped by a fixture before it asks for a cluster) is removed."""
    pytester.makepyfile(test_ahead=BOOTED_AHEAD)
    pytester.mkdir("experiments")
    (pytester.path / "experiments" / "workloads").symlink_to(ROOT / "experiments" / "workloads")
    results = pytester.path / "allure"
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", f"--alluredir={results}", "--raychaos-boot-ahead=true"
    )
    result.assert_outcomes(passed=2, skipped=1)
    run_id = next(
        line.split()[2].rstrip(",") for line in result.outlines if line.startswith("raychaos: run ")
    )
    assert ours(docker_client, run_id) == []
    clusters = [
        cluster
        for path in results.glob("*-attachment.json")
        for cluster in json.loads(path.read_text()).get("clusters", [])
    ]
    assert sorted(bool(c.get("ahead")) for c in clusters) == [False, True], clusters
    ahead = next(c for c in clusters if c.get("ahead"))
    assert ahead["booted"] and ahead["waited_s"] < ahead["boot_s"], ahead
