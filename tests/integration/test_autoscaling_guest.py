"""An autoscaling cluster as another repository writes one: through the plugin's marker and
fixtures alone, it scales from no worker to the demand and back, and leaves nothing behind,
also when pytest is SIGKILLed while the autoscaler is still launching.

Both cases run pytest in a separate process on a file of their own (pytester), as a team's
repository would, then look at the engine for anything that carries the run's label.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import docker
import pytest
from _procs import (
    leftovers,
    pytest_process,
    reapers_of,
    remove_run,
    wait_booted,
    wait_exited,
    wait_no_leftovers,
)

#: Zero workers at start; two 1-CPU nodes at most; idle nodes go after 6 s; a round a second.
CLUSTER = """
import json
import os
import time

import pytest

from chaos.cluster.autoscaler import launches, removals
from chaos.waits import wait_until

SPEC = dict(
    workers=0,
    driver=False,
    head={{"num_cpus": 0}},
    autoscaling={{
        "node_types": [{{"name": "cpu", "num_cpus": 1, "max_workers": 2}}],
        "max_workers": 2,
        "idle_timeout_minutes": 0.1,
        "update_interval_s": 1,
    }},
)
# The GCS address is given: a bare ray.init() right after the boot may find no address file
# yet (`ray start --head` writes it after its node is ALIVE) and start a cluster of its own.
DEMAND = (
    "import ray, time; ray.init(address=ADDRESS);"
    "f = ray.remote(num_cpus=1)(lambda: time.sleep(5));"
    "ray.get([f.remote() for _ in range(2)], timeout=300)"
)


def demand(cluster):
    return DEMAND.replace("ADDRESS", '"' + cluster.plan.gcs_address + '"')


def count(events, n):
    assert len(events()) >= n, f"{{len(events())}} of {{n}}"


@pytest.mark.cluster(**SPEC)
def test_scales_from_zero_to_the_demand_and_back(ray_cluster):
    assert not launches(ray_cluster)
    driver = ray_cluster.exec("head", ["python", "-c", demand(ray_cluster)], timeout=300)
    assert driver.ok, driver.output
    launched = len(launches(ray_cluster))
    assert launched >= 1, "the demand launched nothing"
    wait_until(lambda: count(lambda: removals(ray_cluster), launched), 90, "all removed as idle")
    assert ray_cluster.autoscaler.launched == {{}}
    with open({result!r}, "w") as out:
        json.dump({{"run": ray_cluster.backend.identity.run_id}}, out)


@pytest.mark.cluster(**SPEC)
def test_hangs_mid_scale_up(ray_cluster):
    background = ["sh", "-c", f"nohup python -c '{{demand(ray_cluster)}}' >/tmp/demand.log 2>&1 &"]
    assert ray_cluster.exec("head", background, timeout=60).ok
    wait_until(lambda: count(lambda: launches(ray_cluster), 1), 120, "a first launch")
    booted = {{
        "key": ray_cluster.backend.key,
        "run": ray_cluster.backend.identity.run_id,
        "pid": os.getpid(),
        "launched": len(launches(ray_cluster)),
    }}
    with open({marker!r}, "w") as out:
        json.dump(booted, out)
    time.sleep(600)
"""


def _write(pytester: pytest.Pytester) -> tuple[Path, Path]:
    marker, result = pytester.path / "booted", pytester.path / "result.json"
    pytester.makepyfile(test_guest=CLUSTER.format(marker=str(marker), result=str(result)))
    return marker, result


def _start(pytester: pytest.Pytester, selected: str) -> tuple[subprocess.Popen[str], Path]:
    """pytest on the guest file, only the test ``selected`` names; its output goes to a log."""
    log = pytester.path / "pytest.out"
    with log.open("w") as out:
        proc = pytest_process(
            [str(pytester.path / "test_guest.py"), "-k", selected], pytester.path, out
        )
    return proc, log


def test_an_autoscaling_cluster_scales_up_and_down_and_leaves_nothing(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    import json

    _, result = _write(pytester)
    proc, log = _start(pytester, "scales_from_zero")
    try:
        code = proc.wait(600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert code == 0, log.read_text()[-4000:]
    run = json.loads(result.read_text())["run"]
    try:
        assert leftovers(docker_client, run) == [], "the run's objects outlived it"
    finally:
        remove_run(docker_client, run)


def test_a_sigkill_mid_scale_up_leaves_nothing_within_60_s(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    marker, _ = _write(pytester)
    proc, log = _start(pytester, "mid_scale_up")
    booted = None
    try:
        booted = wait_booted(marker, proc, log)
        reapers = reapers_of(proc.pid)
        assert len(reapers) == 1, f"one reaper per process that uses Docker: {reapers}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        wait_no_leftovers(docker_client, booted["run"], within=60)
        wait_exited(reapers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if booted is not None:
            remove_run(docker_client, booted["run"])
