"""The crash matrix: a run signalled mid-experiment leaves nothing behind, with no second run.

For SIGINT and SIGTERM of pytest, SIGKILL of pytest and SIGKILL of one xdist worker, each while
a test holds a booted cluster: within 60 s no container, network or volume carries the run's
label, and nobody starts pytest again. SIGINT/SIGTERM: pytest's own teardown skips the
postconditions and evidence and removes the cluster at once, inside xdist's grace before it
kills a worker. SIGKILL: the killed process's reaper removes it. (The next run's sweep, for what
no reaper could remove, is test_boot.py's ``test_a_sigkilled_run_is_swept_by_the_next``.)

Each case boots one small cluster (three containers); they run one after another. The first
test checks the reaper against the real engine without a cluster (a few seconds).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import pytest
from _procs import (
    hanging,
    leftovers,
    pytest_process,
    reapers_of,
    remove_run,
    wait_booted,
    wait_exited,
    wait_no_leftovers,
)
from xdist.workermanage import NodeManager

from chaos.backends.docker.images import ImageBuilder
from chaos.labels import process_start_ticks
from chaos.plugin.settings import Settings
from chaos.resources import default_cache_dir

#: xdist kills a worker this long after asking it to stop (Ctrl-C, a crashed controller).
XDIST_GRACE_S = float(NodeManager.EXIT_TIMEOUT)


def _start(pytester: pytest.Pytester, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    marker = pytester.path / "booted"
    pytester.makepyfile(test_hang=hanging(marker))
    log = pytester.path / "pytest.out"
    with log.open("w") as out:
        proc = pytest_process([*args, str(pytester.path / "test_hang.py")], pytester.path, out)
    return proc, marker, log


def _finish(
    proc: subprocess.Popen[str], client: docker.DockerClient, booted: dict[str, Any] | None
) -> None:
    """Whatever happened: no pytest left running, no object of the run left behind."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
    if booted is not None:
        remove_run(client, booted["run"])


def _reaper_log(pid: int, start: str) -> str:
    path = default_cache_dir() / "reaper" / f"{pid}-{start}.log"
    return path.read_text() if path.is_file() else f"(no reaper log at {path})"


OWNER = """
import json, sys, time
from chaos import labels
from chaos.backends.docker import reaper
from chaos.backends.docker.client import connect

client = connect()
identity = labels.RunIdentity(run_id=sys.argv[1], worker="owner")
key = identity.name("c")
owned = identity.labels(cluster=key)
client.networks.create(key, driver="bridge", internal=True, labels=owned)
client.volumes.create(key + "-v", labels=owned)
client.containers.create(sys.argv[2], ["sleep", "600"], name=key + "-n", labels=owned)
print(json.dumps({"reaper": reaper.start(sys.argv[1]).pid}), flush=True)
time.sleep(600)
"""


def test_the_reaper_removes_a_killed_owners_objects_from_the_engine(
    docker_client: docker.DockerClient, image_builder: ImageBuilder, raychaos_settings: Settings
) -> None:
    """The reaper against the real engine, without booting a cluster (seconds)."""
    image = image_builder.ensure(raychaos_settings.ray_version)
    run = uuid.uuid4().hex[:8]
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, run, image], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line, f"the owner failed (exit {owner.wait(60)})"
        reaper_pid = json.loads(line)["reaper"]
        reapers = {reaper_pid: process_start_ticks(reaper_pid)}
        assert len(leftovers(docker_client, run)) == 3
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    try:
        wait_no_leftovers(docker_client, run, within=30)
        wait_exited(reapers)
    finally:
        remove_run(docker_client, run)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_run_removes_its_cluster_at_once(
    pytester: pytest.Pytester, docker_client: docker.DockerClient, signum: signal.Signals
) -> None:
    proc, marker, log = _start(pytester)
    booted = None
    try:
        booted = wait_booted(marker, proc, log)
        assert booted["pid"] == proc.pid
        reapers = reapers_of(proc.pid)
        assert len(reapers) == 1, f"one reaper per process that uses Docker: {reapers}"
        signalled = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(XDIST_GRACE_S + 120)
        took = time.monotonic() - signalled
        output = log.read_text()[-4000:]
        assert code == pytest.ExitCode.INTERRUPTED, output
        # No postconditions (INV-01 alone may wait ~130 s) and no evidence: the cluster goes.
        assert took < XDIST_GRACE_S, f"{signum.name} → exit took {took:.1f} s:\n{output}"
        assert not (pytester.path / "reports" / "timelines").exists(), "evidence was written"
        wait_no_leftovers(docker_client, booted["run"])
        wait_exited(reapers)  # its owner ended: it looked, found nothing, and left
    finally:
        _finish(proc, docker_client, booted)


def test_a_sigkilled_run_is_reaped_without_another_run(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    proc, marker, log = _start(pytester)
    booted = None
    try:
        booted = wait_booted(marker, proc, log)
        reapers, start = reapers_of(proc.pid), process_start_ticks(proc.pid)
        assert len(reapers) == 1, f"one reaper per process that uses Docker: {reapers}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        wait_no_leftovers(docker_client, booted["run"])
        wait_exited(reapers)
        assert "removed container" in _reaper_log(proc.pid, start)
    finally:
        _finish(proc, docker_client, booted)


def test_a_sigkilled_xdist_worker_is_reaped_without_another_run(
    pytester: pytest.Pytester, docker_client: docker.DockerClient
) -> None:
    proc, marker, log = _start(pytester, "-n", "2")
    booted = None
    try:
        booted = wait_booted(marker, proc, log)
        worker = int(booted["pid"])
        assert worker != proc.pid, "the test ran in a worker"
        assert reapers_of(proc.pid) == {}, "the controller never touches Docker"
        reapers, start = reapers_of(worker), process_start_ticks(worker)
        assert len(reapers) == 1, f"one reaper per worker that uses Docker: {reapers}"
        os.kill(worker, signal.SIGKILL)
        wait_no_leftovers(docker_client, booted["run"])
        wait_exited(reapers)
        assert "removed container" in _reaper_log(worker, start)
        # The controller carries on: it reports the crashed worker's test and ends the run.
        assert proc.wait(180) != 0
        assert "crashed" in log.read_text()
    finally:
        _finish(proc, docker_client, booted)
