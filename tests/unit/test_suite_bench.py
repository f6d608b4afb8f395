"""`raychaos bench suite`: a run's wall time broken down from its Allure results alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from chaos.bench.suite import bench_suite
from chaos.cli import main
from chaos.report.timing import TIMING

T0 = 1_700_000_000_000  # ms


def _write(directory: Path, name: str, data: Any) -> None:
    (directory / name).write_text(json.dumps(data))


def _run(directory: Path, *, environment: bool = True) -> Path:
    """Two workers, two tests: each boots a cluster (one queued 20 s behind the other)."""
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
    from chaos.report.timing import attach, cluster_timing, removing
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
