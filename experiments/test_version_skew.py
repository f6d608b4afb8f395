"""Version skew (Ray: ``check_version_info``): VER-01, VER-02, VER-03.

A worker image of another Ray release (``--raychaos-skew-from``, else another release of the
run, else the release before the one under test) joins, or drives, the cluster; a worker whose
interpreter is another Python patch release joins with and without
``RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from chaos.testing import (
    GCS_PORT,
    Cluster,
    ClusterFactory,
    ImageBuilder,
    NodeSpec,
    PythonPatchUnavailable,
    Settings,
    labels,
    poll,
    python_patch,
    skew_partner,
)

#: `ray start` of a mismatched worker must give up "within seconds", counted from its
#: container's start. Ray sets no timeout on it: node.py's ``Node.__init__`` runs
#: ``check_version_info`` (one read of the cluster metadata) right after its GCS client
#: connects, before it spawns any process; only an unreachable GCS would stretch it
#: (``_init_gcs_client``'s RAY_NUM_REDIS_GET_RETRIES tries). The 60 s is a budget, not a
#: measured value: the runs' exit times were not kept (data/ver.json has none).
REJECT_WITHIN_S = 60
MATCH_LEVEL = "RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL"
#: ``ray status``'s "Total Usage" CPU line: "0.0/2.0 CPU".
CPUS_COUNTED = re.compile(r"^\s*[\d.]+/([\d.]+) CPU\s*$", re.MULTILINE)
#: Six autoscaler rounds at Ray's default 5 s: the monitor's report must have caught up with
#: the nodes the boot saw ALIVE in the GCS by then.
STATUS_CURRENT_WITHIN_S = 30


@pytest.fixture
def skewed(
    ray_cluster_factory: ClusterFactory, raychaos_settings: Settings, raychaos_ray_version: str
) -> tuple[Cluster, str]:
    """The run's release with one worker of another (``skew_partner``: --raychaos-skew-from,
    else another release of the run, else the release before)."""
    other = skew_partner(
        raychaos_ray_version, raychaos_settings.ray_versions, raychaos_settings.skew_from
    )
    # No driver node: nothing here strikes the head, so the drivers run there.
    cluster = ray_cluster_factory(
        driver=False,
        workers=(
            NodeSpec(name="worker", count=1),
            NodeSpec(name="skewed", ray_version=other, expect_join=False),
        ),
    )
    return cluster, other


@pytest.fixture
def patch_image(
    image_builder: ImageBuilder,
    raychaos_settings: Settings,
    raychaos_identity: labels.RunIdentity,
    raychaos_ray_version: str,
) -> tuple[str, python_patch.Interpreter]:
    """The suite's Ray image with its venv on another patch release of the same Python."""
    if raychaos_settings.image:
        pytest.skip(
            f"VER-02 moves raychaos's own image's venv (/opt/ray) onto another patch release of "
            f"its Python; {raychaos_settings.image} (--raychaos-image) has a layout of its own: "
            "run VER-02 on raychaos's images (without --raychaos-image)"
        )
    base = image_builder.ensure(raychaos_ray_version)
    given = raychaos_settings.patch_python
    try:
        interpreter = python_patch.probe(given or python_patch.host_interpreter())
        tag = python_patch.ensure_image(
            image_builder, base, interpreter, raychaos_identity.labels()
        )
    except PythonPatchUnavailable as exc:
        if given:  # asked for explicitly: a bad value is an error, not a skip
            raise
        pytest.skip(f"VER-02 cannot be staged with the host's interpreter: {exc}")
    return tag, interpreter


def _ray_start_ended(cluster: Cluster, node: str) -> tuple[int, str]:
    """Wait (bounded) for ``ray start`` on ``node`` to exit; its exit code and output.

    Records the time from container start to exit as a measurement.
    """

    def exited() -> None:
        assert cluster.exec(node, ["test", "-f", "/raychaos/state/ray-start.rc"]).exit_code == 0

    poll(exited, REJECT_WITHIN_S)
    rc = int(cluster.exec(node, ["cat", "/raychaos/state/ray-start.rc"]).output.strip())
    log = cluster.exec(node, ["cat", "/raychaos/state/ray-start.log"]).output
    mtime = float(cluster.exec(node, ["stat", "-c", "%Y", "/raychaos/state/ray-start.rc"]).output)
    took = mtime - cluster.backend.started_at(node)
    cluster.history.record("checker", "measurement", name="ray start → exit (s)", value=took)
    assert took <= REJECT_WITHIN_S, f"ray start on {node} took {took:.0f} s"
    return rc, log


def _assert_never_registered(cluster: Cluster, node: str, cpus: int) -> None:
    """Neither the State API nor ``ray status`` knows ``node``; only ``cpus`` CPUs are counted.

    ``ray status`` prints the monitor's last report (its header names the time), written once
    per autoscaler round (``AUTOSCALER_UPDATE_INTERVAL_S``, 5 s by default): on a busy host the
    first report read may predate the worker that booted beside ``node``. Wait (bounded) until
    the report counts at least ``cpus`` CPUs, then judge it: exactly ``cpus``.
    """
    nodes = cluster.exec(
        cluster.driver.name,
        ["python", "-m", "raychaos_agent.state", "nodes", cluster.dashboard_url],
    ).output
    assert cluster.node(node).ip not in nodes, f"{node} must never register: {nodes}"
    seen: list[str] = []

    def current() -> None:
        seen.append(cluster.ray_status())
        counted = CPUS_COUNTED.search(seen[-1])
        assert counted and float(counted.group(1)) >= cpus, seen[-1]

    poll(current, STATUS_CURRENT_WITHIN_S, period=2)
    # The report names nodes by Ray node id, not address: the CPU total is what shows `node`
    # uncounted (each node has 1 CPU).
    assert f"/{cpus}.0 CPU" in seen[-1], f"ray status must not count {node}: {seen[-1]}"
    if len(seen) > 1:
        cluster.history.record(
            "checker", "measurement", name="ray status reports read until current", value=len(seen)
        )


def _python_of(cluster: Cluster, node: str) -> str:
    argv = ["python", "-c", "import platform; print(platform.python_version())"]
    return cluster.exec(node, argv).output.strip()


def _patched_cluster(
    factory: ClusterFactory,
    patch_image: tuple[str, python_patch.Interpreter],
    **patched: Any,
) -> tuple[Cluster, str]:
    """Head + worker on the image's Python, node "patched" on the other patch release.

    Proves the fault before anything is judged: the node's Ray really runs on another patch
    release of the same minor. Returns the cluster and the head's Python version.
    """
    tag, interpreter = patch_image
    cluster = factory(
        driver=False,
        workers=(
            NodeSpec(name="worker", count=1),
            NodeSpec(name="patched", image=tag, **patched),
        ),
    )
    cluster_python = _python_of(cluster, "head")
    assert _python_of(cluster, "patched") == interpreter.version != cluster_python
    assert interpreter.minor == cluster_python.rsplit(".", 1)[0]
    return cluster, cluster_python


@pytest.mark.claim("VER-01", "PEND-03")
def test_worker_of_another_release_is_rejected_and_never_registers(
    skewed: tuple[Cluster, str],
) -> None:
    """`ray start` of a worker with another Ray release exits non-zero with the mismatch text."""
    cluster, other = skewed
    rc, log = _ray_start_ended(cluster, "skewed")
    assert rc != 0, f"ray start of a {other} worker must fail, exited {rc}"
    assert "Version mismatch" in log, f"expected the mismatch text, got: {log[-800:]}"
    assert "The cluster was started with" in log
    assert f"Ray: {other}" in log
    _assert_never_registered(cluster, "skewed", cpus=2)  # head and worker: 1 CPU each


@pytest.mark.claim("VER-02")
def test_python_patch_skew_is_rejected_by_default(
    ray_cluster_factory: ClusterFactory,
    patch_image: tuple[str, python_patch.Interpreter],
) -> None:
    """A worker on another Python patch release is rejected like a Ray release mismatch."""
    _, interpreter = patch_image
    cluster, cluster_python = _patched_cluster(ray_cluster_factory, patch_image, expect_join=False)
    unset = cluster.exec("patched", ["printenv", MATCH_LEVEL])
    assert unset.exit_code != 0, f"the default match level is under test, found {unset.output}"
    rc, log = _ray_start_ended(cluster, "patched")
    assert rc != 0, f"ray start on Python {interpreter.version} must fail, exited {rc}"
    assert "Version mismatch: The cluster was started with" in log, log[-800:]
    assert f"Python: {cluster_python}" in log and f"Python: {interpreter.version}" in log, log
    _assert_never_registered(cluster, "patched", cpus=2)


@pytest.mark.claim("VER-02")
def test_python_patch_skew_joins_with_a_warning_at_minor_match_level(
    ray_cluster_factory: ClusterFactory,
    patch_image: tuple[str, python_patch.Interpreter],
) -> None:
    """With the match level at ``minor`` the same node joins, warns, and runs tasks."""
    _, interpreter = patch_image
    # The boot waits until every expected node, "patched" included, is ALIVE in the GCS.
    cluster, cluster_python = _patched_cluster(
        ray_cluster_factory, patch_image, env={MATCH_LEVEL: "minor"}
    )
    assert cluster.exec("patched", ["printenv", MATCH_LEVEL]).output.strip() == "minor"
    rc, log = _ray_start_ended(cluster, "patched")
    assert rc == 0, f"ray start at match level minor must succeed, exited {rc}: {log[-800:]}"
    assert "Python patch version mismatch: The cluster was started with" in log, log[-800:]
    assert f"Python: {interpreter.version}" in log
    assert "Version mismatch: The cluster" not in log, "a warning, not the rejection"
    seen = cluster.run("workloads.version:interpreters", on="patched", timeout=180).result()
    assert seen["remote"]["python"] == interpreter.version, seen
    assert seen["driver"]["python"] == cluster_python, seen


def other_release_venv(cluster: Cluster, source: str, target: str, path: str) -> str:
    """Copy the venv of ``source`` (another Ray release) into ``target``; return its python.

    A driver needs a raylet on its own host, so the skewed driver runs on the node hosting the
    drivers (here the head) with the other release's interpreter, exactly as a user with a
    mismatched venv would.
    """
    cluster.backend.copy(source, "/opt/ray", target, "/tmp")
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
