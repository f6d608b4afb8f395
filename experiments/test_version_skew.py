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
    Verdict,
    labels,
    poll,
    python_patch,
    skew_partner,
)

from .verdicts.versions import (
    REJECT_WITHIN_S,
    RayStart,
    Registration,
    mismatched_node_uncounted,
    other_release_driver_refused,
    other_release_rejected,
    patch_skew_rejected,
    patch_skew_warns_at_minor,
)

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


def judge(cluster: Cluster, verdict: Verdict) -> str:
    """What ``Experiment.judge`` does, for these experiments, which boot their clusters
    themselves (no Experiment): the verdict's measurements into the cluster's history, its
    error raised unless it held."""
    for m in verdict.measured:
        cluster.history.record("checker", "measurement", name=m.name, value=m.value)
    if not verdict.held:
        raise verdict.error()
    return verdict.reason


def _ray_start_ended(cluster: Cluster, node: str) -> RayStart:
    """Wait (bounded) for ``ray start`` on ``node`` to exit; its exit code, its output, and
    the time from its container's start to its exit."""

    def exited() -> None:
        assert cluster.exec(node, ["test", "-f", "/raychaos/state/ray-start.rc"]).exit_code == 0

    poll(exited, REJECT_WITHIN_S)
    rc = int(cluster.exec(node, ["cat", "/raychaos/state/ray-start.rc"]).output.strip())
    log = cluster.exec(node, ["cat", "/raychaos/state/ray-start.log"]).output
    mtime = float(cluster.exec(node, ["stat", "-c", "%Y", "/raychaos/state/ray-start.rc"]).output)
    return RayStart(node, rc, log, mtime - cluster.backend.started_at(node))


def _registration(cluster: Cluster, node: str, cpus: int) -> Registration:
    """What the State API and ``ray status`` know of ``node``, ``cpus`` CPUs having joined.

    ``ray status`` prints the monitor's last report (its header names the time), written once
    per autoscaler round (``AUTOSCALER_UPDATE_INTERVAL_S``, 5 s by default): on a busy host the
    first report read may predate the worker that booted beside ``node``. Wait (bounded) until
    the report counts at least ``cpus`` CPUs; the verdict judges it: exactly ``cpus``.
    """
    nodes = cluster.exec(
        cluster.driver.name,
        ["python", "-m", "raychaos_agent.state", "nodes", cluster.dashboard_url],
    ).output
    seen: list[str] = []

    def current() -> None:
        seen.append(cluster.ray_status())
        counted = CPUS_COUNTED.search(seen[-1])
        assert counted and float(counted.group(1)) >= cpus, seen[-1]

    poll(current, STATUS_CURRENT_WITHIN_S, period=2)
    if len(seen) > 1:
        cluster.history.record(
            "checker", "measurement", name="ray status reports read until current", value=len(seen)
        )
    return Registration(node, cluster.node(node).ip, nodes, seen[-1], cpus)


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
    start = _ray_start_ended(cluster, "skewed")
    seen = _registration(cluster, "skewed", cpus=2)  # head and worker: 1 CPU each
    judge(cluster, other_release_rejected(start, seen, other))
    judge(cluster, mismatched_node_uncounted(seen))


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
    start = _ray_start_ended(cluster, "patched")
    seen = _registration(cluster, "patched", cpus=2)
    judge(cluster, patch_skew_rejected(start, seen, cluster_python, interpreter.version))


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
    start = _ray_start_ended(cluster, "patched")
    seen = cluster.run("workloads.version:interpreters", on="patched", timeout=180).result()
    judge(cluster, patch_skew_warns_at_minor(start, seen, cluster_python, interpreter.version))


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
    judge(cluster, other_release_driver_refused(outcome.error, outcome.value, other))
