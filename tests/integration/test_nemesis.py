"""Every fault proves its effect and its heal on a real cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import docker
import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from chaos.check.deaths import stays_dead
from chaos.check.windows import fault_to_node_dead, injected
from chaos.cluster.cluster import Cluster
from chaos.errors import ChaosError, FaultNotObserved
from chaos.experiment import Experiment
from chaos.nemesis.nemesis import Nemesis
from chaos.nemesis.network import CHAIN_PREFIX, connects
from chaos.observer.gaps import HEARTBEAT_PERIODS, Sampling, gaps, samples
from chaos.observer.observer import Observer
from chaos.report.timeline import write_evidence


def _at_least(n: int, beats: list[float]) -> None:
    assert len(beats) >= n, f"{len(beats)} heartbeats"


FAST = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


@pytest.mark.cluster(env=FAST)
def test_kill_node_is_seen_dead_within_the_health_check_band(
    experiment: Experiment, tmp_path: Path
) -> None:
    victim = experiment.cluster.node("worker-1")
    victim_id = str(victim.node_id)
    fault = experiment.nemesis.kill_node("worker-1")
    band = experiment.node_death_band()

    def dead() -> None:
        assert experiment.observer.latest_nodes()[victim_id]["state"] == "DEAD"

    from chaos.waits import wait_until

    wait_until(dead, band.high + 5, "worker-1 DEAD in the GCS")
    window = fault_to_node_dead(
        experiment.history, injected(experiment.history, "kill_node"), victim_id
    )
    experiment.measure("kill → DEAD (s)", window)
    assert window is not None and window in band, f"{window} s outside {band}"
    assert fault.permanent
    # The observer's heartbeats: the old id stays DEAD on a fresh sample of a whole window
    # (INV-02 at teardown judges the same way).
    sampling = Sampling.of(experiment.history)
    assert (
        sampling is not None
        and sampling.heartbeat_s == HEARTBEAT_PERIODS * experiment.observer.period
    )
    assert stays_dead(experiment, victim_id, fault.injected_at, "worker-1 killed")[-1] == "DEAD"
    # Five heartbeats span a few seconds: on a loaded host the body can end sooner, so wait
    # for them (each at most max_gap_s apart, else the gap check below fails anyway).
    wait_until(
        lambda: _at_least(5, samples(experiment.history)),
        6 * sampling.max_gap_s,
        "five observer heartbeats",
    )
    beats = samples(experiment.history)
    assert not gaps(experiment.history, beats[0], beats[-1], sampling.max_gap_s)
    _, picture = write_evidence(experiment, tmp_path, "kill")
    assert picture is not None and picture.stat().st_size > 10_000
    # A stopped observer leaves no sampler behind in its node (an exec cannot be killed
    # through Docker's API: it is stopped by the PID it reports).
    extra = Observer(experiment.cluster, actors=False, pgs=False).start()
    assert extra.wait_first_sample(30)
    assert len(_samplers(experiment.cluster)) == 2
    extra.stop()
    assert len(_samplers(experiment.cluster)) == 1


def _samplers(cluster: Cluster) -> list[str]:
    """PIDs of the observer agents running on the driver node."""
    done = cluster.exec(
        cluster.driver.name, ["pgrep", "-f", "^python -u -m raychaos_agent.observe"]
    )
    assert done.exit_code in (0, 1), done.output  # 1: none
    return done.output.split()


def test_partition_blocks_both_ways_and_heals(ray_cluster: Cluster) -> None:
    nemesis = Nemesis(ray_cluster)
    head = ray_cluster.head.name
    with nemesis.partition([["worker-1"], [head, "worker-2", "driver"]]) as fault:
        rules = ray_cluster.exec("worker-1", ["iptables", "-S", fault.chain]).output
        assert "-j DROP" in rules
        assert connects(ray_cluster, "worker-1", head) is False
        assert connects(ray_cluster, head, "worker-1") is False
    assert fault.healed
    assert connects(ray_cluster, "worker-1", head) is True
    assert CHAIN_PREFIX not in ray_cluster.exec("worker-1", ["iptables", "-S"]).output
    kinds = [e.kind for e in ray_cluster.history.events(source="nemesis")]
    assert kinds == ["inject", "verified", "heal"]


def test_partition_cuts_an_established_connection(ray_cluster: Cluster) -> None:
    """A TCP connection opened before the partition stops carrying bytes once it strikes."""
    server = ray_cluster.stream(
        "worker-2",
        [
            "python3",
            "-u",
            "-c",
            "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', 7777)); s.listen(1); c,_=s.accept(); print('accepted', flush=True)\n"
            "while True:\n  d=c.recv(64)\n  if not d: break\n  c.sendall(d)\n",
        ],
        source="echo-server",
        bound_s=300,
    )
    client = ray_cluster.stream(
        "worker-1",
        [
            "python3",
            "-u",
            "-c",
            "import socket,time\n"
            "for _ in range(100):\n"
            "  try:\n"
            f"    c=socket.create_connection(({ray_cluster.node('worker-2').ip!r}, 7777), timeout=5); break\n"
            "  except OSError:\n    time.sleep(0.2)\n"
            "c.settimeout(1)\n"
            "for i in range(600):\n"
            "  try:\n    c.sendall(b'x'); c.recv(1); print('ok', flush=True)\n"
            "  except OSError as e:\n    print('fail', type(e).__name__, flush=True)\n"
            "  time.sleep(0.2)\n",
        ],
        source="echo-client",
        bound_s=300,
    )
    try:
        from chaos.waits import poll

        poll(lambda: _assert_tail(client.output, "ok"), 30)
        nemesis = Nemesis(ray_cluster)
        with nemesis.partition([["worker-1"], ["worker-2"]]):
            poll(lambda: _assert_tail(client.output, "fail"), 15)
        poll(lambda: _assert_tail(client.output, "ok"), 30)
    finally:
        client.stop()
        server.stop()


def _assert_tail(lines: list[str], word: str) -> None:
    assert lines and lines[-1].startswith(word), f"last line {lines[-1:]!r}"


def test_pause_and_kill_raylet_prove_their_effect(ray_cluster: Cluster) -> None:
    nemesis = Nemesis(ray_cluster)
    with nemesis.pause_node("worker-2"):
        assert ray_cluster.backend.state("worker-2") == "paused"
    assert ray_cluster.backend.state("worker-2") == "running"
    fault = nemesis.kill_raylet("worker-1")
    assert nemesis.pids("worker-1", "raylet") == []
    assert fault.details["pid"] > 0


def test_a_fault_that_cannot_strike_is_inconclusive(ray_cluster: Cluster) -> None:
    nemesis = Nemesis(ray_cluster)
    nemesis.kill_raylet("worker-1")
    with pytest.raises(FaultNotObserved, match="expected one raylet"):
        nemesis.kill_raylet("worker-1")


def test_a_fault_left_active_by_a_failing_test_is_healed(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    root = Path(__file__).resolve().parents[2]
    pytester.mkdir("experiments")
    (pytester.path / "experiments" / "workloads").symlink_to(root / "experiments" / "workloads")
    pytester.makepyfile(
        """
        import json, pathlib

        def test_fails(ray_cluster, nemesis):
            nemesis.partition([["worker-1"], ["head"]])
            pathlib.Path("names.json").write_text(json.dumps(
                [ray_cluster.backend.describe("worker-1")]))
            raise AssertionError("boom while partitioned")
        """
    )
    result = pytester.runpytest_subprocess("--raychaos-keep", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    import json

    (container_name,) = json.loads((pytester.path / "names.json").read_text())
    container = docker_client.containers.get(container_name)  # kept for inspection
    try:
        rules = bytes(container.exec_run(["iptables", "-S"]).output).decode()  # type: ignore[arg-type]
        assert CHAIN_PREFIX not in rules, "teardown healed the partition before keeping it"
    finally:
        # Remove only that kept cluster: other xdist workers' clusters are live.
        from chaos.backends.docker.sweep import kept_dir

        key = container.labels["raychaos.cluster"]
        selector: dict[str, str | list[str] | bool] = {"label": f"raychaos.cluster={key}"}
        for leftover in docker_client.containers.list(
            all=True, ignore_removed=True, filters=selector
        ):
            leftover.remove(force=True, v=True)
        for network in docker_client.networks.list(filters=selector):
            network.remove()
        (kept_dir() / key).unlink(missing_ok=True)


@pytest.mark.cluster(workers=[{"name": "worker", "count": 2, "tmpfs": {"/scratch": "size=64m"}}])
def test_degrade_pressure_disk_and_restart_prove_their_effect(ray_cluster: Cluster) -> None:
    """netem delay is measurable, memory is resident, the disk is full; all undone on heal."""
    nemesis = Nemesis(ray_cluster)
    worker, head = ray_cluster.node("worker-1"), ray_cluster.head

    def connect_ms() -> float:
        probe = (
            "import socket,time\n"
            "t=time.perf_counter()\n"
            f"socket.create_connection(({head.ip!r}, 6379), timeout=5).close()\n"
            "print((time.perf_counter()-t)*1000)"
        )
        return float(ray_cluster.exec("worker-1", ["python3", "-c", probe]).output.strip())

    netem = (
        ray_cluster.exec(
            "worker-1",
            ["sh", "-c", "tc qdisc add dev lo root netem delay 1ms && tc qdisc del dev lo root"],
        ).exit_code
        == 0
    )
    if netem:
        with nemesis.degrade("worker-1", delay_ms=200):
            assert connect_ms() >= 190, "a TCP handshake from the degraded node pays the delay"
        assert connect_ms() < 100, "healed: the delay is gone"
    else:
        with pytest.raises(ChaosError, match="netem"):
            nemesis.degrade("worker-1", delay_ms=200)
    with nemesis.degrade("worker-1", loss_pct=100):
        assert connects(ray_cluster, "worker-1", head.name) is False, "100 % loss: none passes"
    assert connects(ray_cluster, "worker-1", head.name) is True, "healed: traffic flows again"

    holder = ["pgrep", "-f", "^python3 -c import json, os, time"]
    with nemesis.memory_pressure("worker-2", 300 * 1024**2) as pressure:
        assert pressure.details["bytes"] == 300 * 1024**2
        assert ray_cluster.exec("worker-2", holder).exit_code == 0, "the allocator runs"
    assert ray_cluster.exec("worker-2", holder).exit_code == 1, "healed: the allocator is gone"

    with pytest.raises(ChaosError, match="not under a tmpfs"):
        nemesis.fill_disk("worker-1", "/tmp", 0.9)  # the Docker host's own disk: refused
    with nemesis.fill_disk("worker-1", "/scratch", 0.9) as disk:
        out = ray_cluster.exec("worker-1", ["df", "--output=pcent", "/scratch"]).output
        assert int(out.split()[-1].rstrip("%")) >= 89
    assert ray_cluster.exec("worker-1", ["test", "-e", disk.file]).exit_code == 1

    old_id = worker.node_id
    nemesis.restart_node("worker-1")
    assert worker.node_id and worker.node_id != old_id, "a restarted node is a new node id"
    assert old_id in worker.past_node_ids
    nemesis.stop_node("worker-2")
    assert nemesis.pids("worker-2", "raylet") == []
    kinds = [
        (e.kind, e.get("fault"))
        for e in ray_cluster.history.events(source="nemesis")
        if e.kind in {"inject", "verified"}
    ]
    assert kinds.count(("verified", "degrade")) == 1 + netem
    assert kinds.count(("verified", "restart_node")) == 1


@pytest.mark.cluster(workers=2)
def test_targets_by_ray_role_name_the_node(ray_cluster: Cluster, nemesis: Nemesis) -> None:
    """The State API lookups find where a running task and an actor are."""
    run = ray_cluster.run(
        "workloads.basics:hold_on", task_node="worker-2", actor_node="worker-1", seconds=60
    )
    run.wait_for("holding", timeout=120)
    running = poll_value(lambda: nemesis.node_running_task("hold_task"), 30)
    assert running == "worker-2"
    assert nemesis.node_of_actor("holder") == "worker-1"
    run.stop()


def poll_value(fetch: Callable[[], str], timeout: float) -> str:
    """The State API lists a task some time after it starts running: retry, bounded."""
    for attempt in Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(1),
        retry=retry_if_exception_type(FaultNotObserved),
        reraise=True,
    ):
        with attempt:
            return fetch()
    raise AssertionError("unreachable")
