"""Experiments spread over two Docker engines on this machine, and one of them dying mid-run.

A session fixture starts a second ``dockerd`` (``second_engine.py``: its own socket, data and
exec roots, containerd, key, default bridge, and one FORWARD rule of its own that lets its
containers reach each other; dockerd's iptables management is off) and, afterwards, stops it
and requires that nothing of it is left on the machine (processes, mounts, bridges, iptables
chain, directories).

In order (a later test reuses what an earlier one put on the second engine, but needs none of
it: under ``pytest tests/ -n 2`` xdist may split this module, and each worker then starts an
engine of its own, named apart):

1. the second engine answers with an ID of its own (boot-slot locks are keyed by it);
2. the Ray image reaches it without a registry: ``docker save`` on the first engine streamed
   into ``docker load`` on the second, its ``raychaos.recipe`` label checked (0.5 GiB, ~20 s);
3. ``experiments/test_tasks.py -n 2`` over both engines: both host clusters (the results'
   ``engine`` labels say so) and nothing of the run is left on either; then an autoscaling
   cluster (AUTOSCALE-04) on the second engine alone;
4. the second engine stops mid-run: the test it hosted ends broken with one ``EngineLost``
   line naming it, the other engine's tests pass, and the worker that lost its engine boots
   its next cluster on the first; nothing of the run is left on the first, and once the
   second is back a sweep there leaves nothing either.

3 and 4 boot Ray clusters (~2.5 min and ~1 min here); 1 and 2 do not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from _procs import ROOT, leftovers, remove_run, wait_no_leftovers
from second_engine import SecondEngine, system_storage_driver
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos import labels
from chaos.backends.docker.engines import default_url
from chaos.backends.docker.images import ImageBuilder, ray_image_tag
from chaos.backends.docker.sweep import sweep
from chaos.plugin.settings import Settings

#: A run of three experiments on a loaded 2-core machine, two clusters booting at once.
RUN_WITHIN_S = 1800


@pytest.fixture(scope="session")
def second_engine() -> Iterator[SecondEngine]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("a second dockerd needs root and dockerd on PATH")
    engine = SecondEngine(Path(tempfile.mkdtemp(prefix="raychaos-engine2-", dir="/var/tmp")))
    engine.storage_driver = system_storage_driver()
    try:
        engine.start()
        print(f"\nsecond engine {engine.url} answered {engine.started_in:.2f} s after spawn")
        yield engine
    finally:
        problems = engine.stop()
        left = engine.leftovers()
        assert left == [], f"the second engine left {left} ({problems})"


@pytest.fixture(scope="session")
def second_client(second_engine: SecondEngine) -> Iterator[docker.DockerClient]:
    client = second_engine.client()
    yield client
    client.close()


def test_the_second_engine_has_an_id_of_its_own(
    second_client: docker.DockerClient, docker_client: docker.DockerClient
) -> None:
    mine, theirs = second_client.info(), docker_client.info()
    assert mine["ID"] and mine["ID"] != theirs["ID"], (mine["ID"], theirs["ID"])
    assert int(mine["NCPU"]) >= 1
    assert mine["DockerRootDir"] != theirs["DockerRootDir"]


def test_the_ray_image_is_carried_to_the_second_engine(
    second_engine: SecondEngine,
    second_client: docker.DockerClient,
    image_builder: ImageBuilder,
    raychaos_settings: Settings,
) -> None:
    """save/load through the API, no registry; the recipe label is checked on arrival."""
    version = raychaos_settings.ray_version
    tag = image_builder.ensure(version)  # current on the first engine (built once if not)
    said: list[str] = []

    def progress(line: str) -> None:
        said.append(line)
        print(f"[second engine] {line}", flush=True)

    receiver = ImageBuilder(
        second_client,
        image_builder.settings,
        progress=progress,
        engine=second_engine.url,
        donors=lambda: [image_builder],
    )
    started = time.monotonic()
    assert receiver.ensure(version) == tag == ray_image_tag(version, "3.11")
    took = time.monotonic() - started
    carried = [line for line in said if line.startswith(f"carried {tag}")]
    assert carried, f"not carried: {said}"
    assert not any(line.startswith("building") for line in said), said
    there, here = second_client.images.get(tag), image_builder.client.images.get(tag)
    assert there.id == here.id
    assert there.labels[labels.IMAGE_RECIPE] == here.labels[labels.IMAGE_RECIPE]
    print(f"carried {tag} ({here.attrs['Size'] / 2**30:.2f} GiB unpacked) in {took:.0f} s")
    # The engine runs a container from it on an internal network the host has no address on.
    network = second_client.networks.create(
        "raychaos-engine2-probe",
        driver="bridge",
        internal=True,
        options={"com.docker.network.bridge.inhibit_ipv4": "true"},
    )
    try:
        output = second_client.containers.run(
            tag,
            ["python", "-c", "import ray; print(ray.__version__)"],
            network=network.name,
            remove=True,
        )
    finally:
        network.remove()
    assert output.decode().strip() == version


def _pytest(args: list[str], cwd: Path, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DOCKER_HOST", None)
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
             "-q", *args],
            env=env, text=True, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=cwd,
        )  # fmt: skip


def _run_to_end(args: list[str], log: Path) -> int:
    """pytest ``args`` from the checkout, waited for (bounded); killed if it overruns."""
    proc = _pytest(args, ROOT, log)
    try:
        return proc.wait(RUN_WITHIN_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _results(alluredir: Path) -> dict[str, dict[str, Any]]:
    """Allure results by test function (``fullName`` ends ``#test_x``: no release parameter,
    none of the title's decorations; one release per run here)."""
    found = {}
    for path in alluredir.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[str(data["fullName"]).rsplit("#", 1)[-1]] = data
    return found


def _label(result: dict[str, Any], name: str) -> list[str]:
    return [x["value"] for x in result.get("labels", []) if x["name"] == name]


def _run_id(alluredir: Path) -> str:
    """The run's id (its objects' ``raychaos.run`` label); "" when the run wrote none."""
    path = alluredir / "environment.properties"
    lines = path.read_text().splitlines() if path.is_file() else []
    return next((ln.split("=", 1)[1] for ln in lines if ln.startswith("raychaos.run=")), "")


def test_experiments_are_spread_over_both_engines(
    second_engine: SecondEngine,
    second_client: docker.DockerClient,
    docker_client: docker.DockerClient,
    tmp_path: Path,
) -> None:
    first = default_url()
    alluredir = tmp_path / "allure"
    log = tmp_path / "pytest.out"
    args = ["experiments/test_tasks.py", "-n", "2", f"--alluredir={alluredir}"]
    args += ["--raychaos-docker-host", first, "--raychaos-docker-host", second_engine.url]
    code = _run_to_end(args, log)
    output = log.read_text()
    print(output[-3000:])
    run = _run_id(alluredir)
    try:
        assert code == 0 and run, output[-4000:]
        results = _results(alluredir)
        assert len(results) == 3, sorted(results)
        engines = {name: _label(r, "engine") for name, r in results.items()}
        assert {e for found in engines.values() for e in found} == {first, second_engine.url}, (
            engines
        )
        assert all(len(found) == 1 for found in engines.values()), engines
        env = (alluredir / "environment.properties").read_text()
        assert f"engine.1={second_engine.url}" in env, env
        assert leftovers(docker_client, run) == []
        assert leftovers(second_client, run) == []
    finally:
        if run:
            remove_run(docker_client, run)
            remove_run(second_client, run)


def test_an_autoscaling_cluster_runs_on_the_second_engine(
    second_engine: SecondEngine, second_client: docker.DockerClient, tmp_path: Path
) -> None:
    """AUTOSCALE-04 with the second engine as the run's only one: the provider's files are
    read and written through that engine's API alone (no host directory is shared), a node is
    launched there and removed as idle, and nothing of the run is left on it."""
    alluredir = tmp_path / "allure"
    log = tmp_path / "pytest.out"
    args = ["experiments/test_autoscale.py", "-k", "idle_timeout and not v2"]
    args += [f"--alluredir={alluredir}", "--raychaos-docker-host", second_engine.url]
    code = _run_to_end(args, log)
    output = log.read_text()
    run = _run_id(alluredir)
    try:
        assert code == 0 and run, output[-4000:]
        results = _results(alluredir)
        assert list(results) == ["test_an_idle_worker_is_removed_after_the_idle_timeout"]
        (result,) = results.values()
        assert _label(result, "engine") == [second_engine.url], result.get("labels")
        assert leftovers(second_client, run) == []
    finally:
        if run:
            remove_run(second_client, run)


#: Two modules, one per xdist worker (``--dist loadfile``; ``xdist_group`` marks are not
#: honoured with pytest 9.2, whose node ids xdist 3.8 can no longer suffix: pytest-xdist#1386).
#: Each boots a cluster, says on which engine, and waits for the go; the second engine is
#: stopped meanwhile; then each needs its engine once more, and boots one more cluster.
LOSES_AN_ENGINE = """
import json
import time
from pathlib import Path

import pytest

from chaos.plugin.keys import ENGINE_KEY

DIR = Path({directory!r})


@pytest.mark.cluster(workers=1, driver=False)
def test_{group}_waits(request, ray_cluster):
    engine = request.node.stash[ENGINE_KEY]
    (DIR / "{group}_waits.json").write_text(json.dumps({{"engine": engine.url}}))
    for _ in range(1200):
        if (DIR / "go").exists():
            break
        time.sleep(0.5)
    # After the go, every test needs its engine once more.
    assert ray_cluster.exec("head", ["true"]).ok


@pytest.mark.cluster(workers=1, driver=False)
def test_{group}_after(request, ray_cluster):
    engine = request.node.stash[ENGINE_KEY]
    (DIR / "{group}_after.json").write_text(json.dumps({{"engine": engine.url}}))
    assert ray_cluster.exec("head", ["true"]).ok
"""


def test_a_lost_engine_breaks_only_what_it_hosted(
    second_engine: SecondEngine,
    docker_client: docker.DockerClient,
    pytester: pytest.Pytester,
) -> None:
    """Runs last: the second engine is stopped (its data root goes with the fixture)."""
    first = default_url()
    signals = pytester.path / "signals"
    signals.mkdir()
    for group in ("a", "b"):
        source = LOSES_AN_ENGINE.format(directory=str(signals), group=group)
        pytester.makepyfile(**{f"test_lose_{group}": source})
    alluredir = pytester.path / "allure"
    log = pytester.path / "pytest.out"
    args = ["test_lose_a.py", "test_lose_b.py", "-n", "2", "--dist", "loadfile"]
    args += [f"--alluredir={alluredir}"]
    args += ["--raychaos-docker-host", first, "--raychaos-docker-host", second_engine.url]
    proc = _pytest(args, pytester.path, log)
    run = ""
    try:
        for attempt in Retrying(stop=stop_after_delay(900), wait=wait_fixed(1), reraise=True):
            with attempt:
                waiting = sorted(signals.glob("*_waits.json"))
                assert len(waiting) == 2 or proc.poll() is not None
        assert proc.poll() is None, log.read_text()[-4000:]
        placed = {p.stem: json.loads(p.read_text())["engine"] for p in waiting}
        assert set(placed.values()) == {first, second_engine.url}, placed
        halted = time.monotonic()
        second_engine.halt()
        print(f"second engine stopped in {time.monotonic() - halted:.1f} s")
        (signals / "go").touch()
        code = proc.wait(RUN_WITHIN_S)
        output = log.read_text()
        print(output[-3000:])
        run = _run_id(alluredir)
        lost_on = next(name for name, url in placed.items() if url == second_engine.url)
        group = lost_on.split("_")[0]
        results = _results(alluredir)
        statuses = {name: r["status"] for name, r in results.items()}
        assert code != 0
        assert statuses == {
            "test_a_waits": "broken" if group == "a" else "passed",
            "test_b_waits": "broken" if group == "b" else "passed",
            "test_a_after": "passed",
            "test_b_after": "passed",
        }, statuses
        broken = results[f"test_{lost_on}"]["statusDetails"]["message"]
        assert broken.startswith(
            f"chaos.backends.docker.client.EngineLost: engine {second_engine.url} stopped answering"
        ), broken
        assert f"EngineLost: engine {second_engine.url} stopped answering" in output
        # The worker that lost its engine booted its next experiment on the first one.
        after = json.loads((signals / f"{group}_after.json").read_text())["engine"]
        assert after == first
        assert _label(results[f"test_{group}_after"], "engine") == [first]
        assert leftovers(docker_client, run) == []
        # The lost engine comes back with the run's stopped cluster on it: a sweep there (the
        # next run's) removes it.
        second_engine.start()
        back = second_engine.client()
        try:
            # (The worker's reaper of that engine may be still trying when it comes back, and
            # remove them first: either way nothing of the run may stay.)
            report = sweep(back, engine=second_engine.url)
            print(f"sweep of the restarted engine: {report}")
            wait_no_leftovers(back, run, within=60)
        finally:
            back.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if run:
            remove_run(docker_client, run)
