"""`raychaos bench suite`: a run's wall time broken down from its Allure results alone."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from chaos.bench.suite import bench_suite
from chaos.cli import main
from chaos.report.hostcpu import CPU_FILE
from chaos.report.timing import TIMING

T0 = 1_700_000_000_000  # ms


def _write(directory: Path, name: str, data: Any) -> None:
    (directory / name).write_text(json.dumps(data))


#: Each test's nodes' container CPU-seconds (boot, body, teardown); None: a read failed.
CPU: list[dict[str, tuple[float | None, float | None, float | None]]] = [
    {"head": (8.0, 6.0, 1.0), "worker-1": (4.0, 3.0, 0.5)},
    {"head": (7.0, 2.0, 1.5), "worker-1": (3.0, None, None)},
]


def _run(directory: Path, *, environment: bool = True, cpu: bool = True) -> Path:
    """Two workers, two tests: each boots a cluster (one queued 20 s behind the other); with
    ``cpu``, the nodes' CPU by phase and the host's record (120 busy CPU-s on 2 cores, 80 s)."""
    directory.mkdir()
    tests = [
        # name, worker, fixture set-up (start, stop), body, fixture teardown, timing
        ("test_a[2.60.0]", "101", (0, 12_000), (12_000, 42_000), (42_000, 45_000), (0.5, 10.0, 3)),
        ("test_b[2.60.0]", "202", (0, 32_000), (32_000, 52_000), (52_000, 55_000), (20.2, 9.5, 2)),
    ]
    for index, (name, worker, setup, body, teardown, timing) in enumerate(tests):
        uuid = f"r{index}"
        queued, boot, down = timing
        _write(
            directory,
            f"{uuid}-result.json",
            {
                "uuid": uuid,
                "name": name,
                "fullName": f"experiments.test_x#{name.split('[')[0]}",
                "historyId": f"h{index}",
                "status": "passed",
                "start": T0 + body[0],
                "stop": T0 + body[1],
                "labels": [{"name": "thread", "value": f"{worker}-MainThread"}],
            },
        )
        source = f"t{index}-attachment.json"
        _write(
            directory,
            source,
            {
                "clusters": [
                    {
                        "cluster": f"c{index}",
                        "nodes": 4,
                        "booted": True,
                        "queued_s": queued,
                        "boot_s": boot,
                        "start_s": queued + boot + 1.0,
                        "teardown_s": down,
                    }
                    | (
                        {
                            "cpu_s": {
                                node: dict(zip(("boot", "body", "teardown"), phases, strict=True))
                                for node, phases in CPU[index].items()
                            }
                        }
                        if cpu
                        else {}
                    )
                ]
            },
        )
        _write(
            directory,
            f"k{index}-container.json",
            {
                "uuid": f"k{index}",
                "children": [uuid],
                "befores": [{"name": "ray_cluster", "start": T0 + setup[0], "stop": T0 + setup[1]}],
                "afters": [
                    {
                        "name": "ray_cluster_factory::0",
                        "start": T0 + teardown[0],
                        "stop": T0 + teardown[1],
                        "attachments": [
                            {"name": TIMING, "source": source, "type": "application/json"}
                        ],
                    }
                ],
            },
        )
    if environment:
        (directory / "environment.properties").write_text("xdist.workers=2\n")
    if cpu:
        start = {"at": T0 / 1000 - 5, "busy_s": 1000.0, "total_s": 5000.0}
        finish = {"at": T0 / 1000 + 75, "busy_s": 1120.0, "total_s": 5160.0}
        _write(directory, CPU_FILE, {"cores": 2, "start": start, "finish": finish})
    return directory


def test_breakdown_of_a_two_worker_run(tmp_path: Path) -> None:
    bench = bench_suite(_run(tmp_path / "run"))
    assert bench.wall_s == 55.0, "first set-up to last teardown"
    assert (bench.workers, bench.workers_from) == (2, "environment.properties xdist.workers")
    assert bench.body_s == 50.0 and bench.ideal_s == 25.0
    assert bench.ratio == pytest.approx(2.2)
    assert len(bench.boots) == 2
    assert bench.total("queued_s") == pytest.approx(20.7)
    assert bench.total("boot_s") == pytest.approx(19.5)
    assert bench.total("teardown_s") == 5.0
    assert (bench.setup_s, bench.teardown_s) == (44.0, 6.0)
    text = bench.text()
    assert re.search(r"overhead ratio wall / \(bodies / workers\) +2\.20×", text), text
    assert "queued for a boot slot" in text and "20.7 s" in text
    assert text.index("test_a[2.60.0]") < text.index("test_b[2.60.0]"), "longest body first"


def test_workers_from_thread_labels_or_the_command_line(tmp_path: Path) -> None:
    directory = _run(tmp_path / "run", environment=False)
    bench = bench_suite(directory)
    assert (bench.workers, bench.workers_from) == (2, "2 distinct thread label(s)")
    assert bench_suite(directory, workers=4).ratio == pytest.approx(55 / 12.5)


def test_results_without_timing_say_so(tmp_path: Path) -> None:
    directory = _run(tmp_path / "run")
    for container in directory.glob("*-container.json"):
        container.unlink()
    bench = bench_suite(directory)
    assert bench.boots == [] and any(TIMING in n for n in bench.notes)


def test_cli_prints_the_breakdown_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _run(tmp_path / "run")
    assert main(["bench", "suite", str(directory)]) == 0
    assert "wall time" in capsys.readouterr().out
    assert main(["bench", "suite", str(directory), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["boots"], data["overhead_ratio"], data["queued_s"]) == (2, 2.2, 20.7)


def test_cli_refuses_a_directory_without_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["bench", "suite", str(tmp_path / "empty")]) == 2
    assert "holds no Allure results" in capsys.readouterr().err


class _Backend:
    """All of a backend that the timing record reads: the cluster's key."""

    key = "rc-t1-cluster"


def test_a_cluster_timing_comes_from_its_history_and_its_removal() -> None:
    from chaos.cluster.cluster import Cluster
    from chaos.history import Kind, Source
    from chaos.plugin.results.timing import attach, cluster_timing, removing
    from chaos.spec.topology import ClusterSpec

    cluster = Cluster(ClusterSpec(), _Backend())  # type: ignore[arg-type]
    assert cluster_timing(cluster) == {"cluster": "rc-t1-cluster", "nodes": 0, "booted": False}
    cluster.history.record(Source.HARNESS, Kind.BOOT_SLOT, queued_s=12.5)
    cluster.history.record(Source.HARNESS, Kind.CLUSTER_READY, seconds=9.1, with_images_s=23.0)
    with removing(cluster):
        pass
    found = cluster_timing(cluster)
    assert {k: found[k] for k in ("queued_s", "boot_s", "start_s", "booted")} == {
        "queued_s": 12.5,
        "boot_s": 9.1,
        "start_s": 23.0,
        "booted": True,
    }
    assert 0 <= found["teardown_s"] < 1
    attach([cluster])  # no Allure listener outside a run: nothing happens, nothing raises


def test_host_and_container_cpu(tmp_path: Path) -> None:
    bench = bench_suite(_run(tmp_path / "run"))
    cpu = bench.cpu
    assert cpu is not None and cpu.host is not None and cpu.recorded
    assert (cpu.host.busy_s, cpu.host.cores, cpu.host.wall_s) == (120.0, 2, 80.0)
    assert (cpu.bound_s, cpu.per_experiment_s) == (60.0, 60.0)
    assert cpu.ratio == pytest.approx(80 / 60)
    assert [cpu.phase(p) for p in ("boot", "body", "teardown")] == [(22.0, 0), (11.0, 1), (3.0, 1)]
    assert sorted(cpu.per_test()) == [13.5, 22.5], "what was read, per test"
    assert cpu.by_node()["head"] == {"boot": 15.0, "body": 8.0, "teardown": 2.5}
    text = bench.text()
    assert re.search(r"host busy CPU-seconds +120\.0 s", text), text
    assert re.search(r"wall / CPU bound +1\.33×", text), text
    assert re.search(r"busy CPU-seconds per experiment +60\.0 s", text), text
    assert re.search(r"body +11\.0 s  1 missing", text), text
    assert re.search(r"median / max +18\.0 s / 22\.5 s", text), text
    assert "overhead ratio wall / (bodies / workers)" in text, "the existing output stays"
    assert any("2 of 12 node-phase CPU readings missing" in n for n in bench.notes)
    data = bench.to_json()["cpu"]
    assert (data["busy_s"], data["wall_over_bound"], data["busy_per_experiment_s"]) == (
        120.0,
        1.333,
        60.0,
    )
    assert data["containers"]["phases_s"] == {"boot": 22.0, "body": 11.0, "teardown": 3.0}


def test_without_a_cpu_record_the_bench_says_why(tmp_path: Path) -> None:
    bench = bench_suite(_run(tmp_path / "old", cpu=False))
    assert bench.cpu is not None and not bench.cpu.recorded and not bench.cpu.readings()
    assert any(f"no {CPU_FILE}" in n for n in bench.notes)
    assert any("2 booted cluster(s) without a CPU record" in n for n in bench.notes)
    assert "host busy CPU-seconds" not in bench.text()
    remote = _run(tmp_path / "remote", cpu=False)
    _write(remote, CPU_FILE, {"cores": 2, "why": "the engine is not this machine (tcp://ci:2376)"})
    bench = bench_suite(remote)
    assert any(
        "not recorded: the engine is not this machine (tcp://ci:2376)" in n for n in bench.notes
    )
    assert bench.to_json()["cpu"]["host_recorded"] is False


def test_proc_stat_parsing_counts_busy_jiffies_over_user_hz(tmp_path: Path) -> None:
    from chaos.plugin.results.hostcpu import parse_proc_stat, sample_host

    #        user nice system idle iowait irq softirq steal guest guest_nice
    text = "cpu  1000 50 300 8000 200 10 40 100 70 0\ncpu0 500 25 150 4000 100 5 20 50 35 0\n"
    busy, total = parse_proc_stat(text, 100)
    assert busy == pytest.approx((1000 + 50 + 300 + 10 + 40 + 100) / 100), "idle, iowait out"
    assert total == pytest.approx(9700 / 100), "guest is inside user already"
    with pytest.raises(ValueError, match="no aggregate"):
        parse_proc_stat("cpu0 1 2 3 4\n", 100)
    (tmp_path / "stat").write_text(text)
    sample = sample_host(tmp_path / "stat")
    assert sample is not None and sample.busy_s > 0 and sample.at > 0
    assert sample_host(tmp_path / "absent") is None


def test_the_host_record_only_for_a_local_engine() -> None:
    from chaos.plugin.results.hostcpu import host_cpu, not_local
    from chaos.report.hostcpu import HostCpu, HostSample

    assert not_local(["unix:///var/run/docker.sock"]) is None
    assert not_local([""]) is None
    assert "tcp://ci:2376" in (not_local(["unix:///x.sock", "tcp://ci:2376"]) or "")
    start = HostSample(at=1.0, busy_s=10.0, total_s=20.0)
    remote = host_cpu(start, ["ssh://ci@build"])
    assert not remote.recorded and "ssh://ci@build" in remote.why
    assert remote.to_json() == {"cores": remote.cores, "why": remote.why}, "no samples written"
    local = host_cpu(start, ["unix:///var/run/docker.sock"])
    assert local.recorded and local.finish is not None
    assert HostCpu.from_json(local.to_json()).busy_s == pytest.approx(local.busy_s, abs=0.01)
    assert not host_cpu(None, ["unix:///x.sock"]).recorded


def test_run_files_carry_the_host_record(tmp_path: Path) -> None:
    from chaos.plugin.results.runfiles import RunInfo, write_run_files
    from chaos.report.hostcpu import HostCpu, HostSample

    record = HostCpu(2, HostSample(1.0, 10.0, 20.0), HostSample(3.0, 13.0, 24.0))
    info = RunInfo("r1", "2.60.0", "default", "img", 0, tmp_path, host_cpu=record)
    write_run_files(tmp_path, info, {"2.60.0"})
    data = json.loads((tmp_path / CPU_FILE).read_text())
    assert data["cores"] == 2 and data["finish"]["busy_s"] == 13.0


@pytest.mark.parametrize(
    ("output", "seconds"),
    [
        ("v2\nusage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n", 2.5),
        ("v1\n3000000000\n", 3.0),
        ("v2\nuser_usec 1\n", None),
        ("v1\ncat: /sys/fs/cgroup/cpuacct/cpuacct.usage: No such file\n", None),
        ("", None),
        ("usage_usec 1\n", None),
    ],
)
def test_cgroup_parsing(output: str, seconds: float | None) -> None:
    from chaos.cluster.cpu import parse_cgroup_cpu

    assert parse_cgroup_cpu(output) == seconds


class _Nodes:
    """A cluster whose nodes answer the cgroup read as given (an exception: the exec failed)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.nodes = dict.fromkeys(answers)
        self.answers = answers
        self.calls: list[tuple[str, list[str]]] = []

    def exec(self, node: str, argv: list[str], *, timeout: float) -> Any:
        from chaos.backends.base import ExecResult

        self.calls.append((node, argv))
        answer = self.answers[node]
        if isinstance(answer, Exception):
            raise answer
        return ExecResult(*answer)


def test_one_exec_per_node_and_a_failed_read_is_missing() -> None:
    from chaos.cluster.cpu import cluster_cpu_seconds

    cluster = _Nodes(
        {
            "head": (0, "v1\n5000000000\n"),
            "worker-1": (1, "v1\n"),
            "worker-2": RuntimeError("container is paused"),
            "driver": (0, "v2\nusage_usec 1500000\n"),
        }
    )
    found = cluster_cpu_seconds(cluster)  # type: ignore[arg-type]
    assert found == {"head": 5.0, "worker-1": None, "worker-2": None, "driver": 1.5}
    assert sorted(n for n, _ in cluster.calls) == ["driver", "head", "worker-1", "worker-2"]
    assert all(argv[:2] == ["sh", "-c"] for _, argv in cluster.calls)


def test_cpu_phases_from_the_three_points() -> None:
    from chaos.plugin.results.timing import cpu_phases

    phases = cpu_phases(
        {
            "ready": {"head": 10.0, "worker-1": 4.0, "worker-2": None},
            "body_end": {"head": 15.0, "worker-1": 1.0, "worker-2": 9.0, "added": 2.0},
            "removal": {"head": 16.5, "worker-1": 1.5, "worker-2": 9.5, "added": 2.25},
        }
    )
    assert phases["head"] == {"boot": 10.0, "body": 5.0, "teardown": 1.5}
    assert phases["worker-1"]["body"] == 1.0, "restarted: its CPU since then (a lower bound)"
    assert phases["worker-2"] == {"boot": None, "body": None, "teardown": 0.5}
    assert phases["added"] == {"boot": 0.0, "body": 2.0, "teardown": 0.25}
    never_ran = cpu_phases({"ready": {"head": 3.0}, "removal": {"head": 4.0}})
    assert never_ran["head"] == {"boot": 3.0, "body": None, "teardown": None}
    gone = cpu_phases({"ready": {"head": 3.0}, "body_end": {}, "removal": {"head": 4.0}})
    assert gone["head"]["body"] is None, "absent after being read: missing, not zero"


def test_the_factory_reads_cpu_into_the_timing_record() -> None:
    from types import SimpleNamespace

    from chaos.backends.base import ExecResult
    from chaos.cluster.cluster import Cluster
    from chaos.plugin.factory import ClusterFactory
    from chaos.plugin.results.timing import cluster_timing
    from chaos.spec.topology import ClusterSpec

    cluster = Cluster(ClusterSpec(), _Backend())  # type: ignore[arg-type]
    cluster.nodes = {"head": None, "worker-1": None}  # type: ignore[dict-item]
    counters = iter([2.0, 1.0, 3.0, 1.5, 3.5, 2.0])

    def read_counter(
        node: str,
        argv: Sequence[str],
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        return ExecResult(exit_code=0, output=f"v1\n{int(next(counters) * 1e9)}\n")

    def read_fails(
        node: str,
        argv: Sequence[str],
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        raise ZeroDivisionError("the read fails")

    # The instance's exec is replaced on purpose by fakes with its signature; mypy flags any
    # assignment to a method (method-assign), and only that is ignored.
    cluster.exec = read_counter  # type: ignore[method-assign]
    factory = ClusterFactory(
        SimpleNamespace(node=SimpleNamespace(nodeid="t.py::test_x")),  # type: ignore[arg-type]
        client=None,  # type: ignore[arg-type]
        identity=None,  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        settings=SimpleNamespace(keep=False),  # type: ignore[arg-type]
        workload_paths=(),
    )
    factory.clusters = [cluster]
    for point in ("ready", "body_end", "removal"):
        factory.cpu_point(point)
    cpu = cluster_timing(cluster)["cpu_s"]
    assert sum(cpu[n]["boot"] for n in cpu) == 3.0
    assert sum(cpu[n]["body"] + cpu[n]["teardown"] for n in cpu) == pytest.approx(2.5)
    cluster.exec = read_fails  # type: ignore[method-assign]
    factory.cpu_point("ready")  # a failing read never raises
    assert cluster_timing(cluster)["cpu_s"]["head"]["body"] is None
