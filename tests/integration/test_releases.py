"""A release raychaos does not list, from a local package index: the real pip, a real wheel.

The index is a find-links directory (``PIP_FIND_LINKS``, with ``PIP_NO_INDEX=1`` so nothing
else is asked): the Ray 2.60.0 wheelhouse, plus its Ray wheel repacked as
``2.60.1+raychaos.test`` (``_wheels.py``), a version absent from the shipped list.

1. ``--raychaos-ray-version 2.60.1+raychaos.test`` is accepted by a pytest process;
2. ``--raychaos-ray-version 2.60.2`` (absent from both) is one usage-error line naming the
   nearest releases that directory has;
3. ``--raychaos-ray-wheel`` with the repacked wheel makes it the run's release.

None of them boots a cluster (13 s together here). The boot on that release is the last test,
run only with ``RAYCHAOS_SLOW_RELEASE_BOOT=1``: the image built from the index (107 s here),
then ``experiments/test_tasks.py``'s three experiments on it; 5 min 20 s by hand on 2 cores,
about 3.5 min once the image exists — over the budget of the default integration run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import ROOT
from _wheels import VERSION, local_index

from chaos.backends.docker.images import ImageBuilder
from chaos.resources import default_cache_dir

#: A collection run in a pytest process; generous on a loaded 2-core machine.
COLLECT_WITHIN_S = 120
#: Image build from the index (~2 min) plus three experiments (~3.5 min) on 2 cores.
BOOT_WITHIN_S = 1200

USES_THE_RELEASE = """
def test_release(raychaos_ray_version):
    print("RELEASE", raychaos_ray_version)
"""


@pytest.fixture(scope="module")
def index(image_builder: ImageBuilder) -> Path:
    """The find-links directory (kept in the cache directory: the next run reuses the repacked
    wheel, and so the image built from it)."""
    wheelhouse = image_builder.wheelhouse("2.60.0", "3.11")
    return local_index(wheelhouse, default_cache_dir() / "test-index" / VERSION)


def _env(index: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index), "PYTHONPATH": str(ROOT)}


def _pytest(
    args: list[str], cwd: Path, env: dict[str, str], within: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=within,
        check=False,
    )


def test_a_release_only_the_index_has_runs(index: Path, tmp_path: Path) -> None:
    (tmp_path / "test_it.py").write_text(USES_THE_RELEASE)
    done = _pytest(
        ["-q", "-s", "test_it.py", f"--raychaos-ray-version={VERSION}"],
        tmp_path,
        _env(index),
        COLLECT_WITHIN_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"RELEASE {VERSION}" in done.stdout, done.stdout


def test_a_release_absent_from_both_is_one_line_naming_the_nearest(
    index: Path, tmp_path: Path
) -> None:
    (tmp_path / "test_it.py").write_text(USES_THE_RELEASE)
    done = _pytest(
        ["-q", "test_it.py", "--raychaos-ray-version=2.60.2"],
        tmp_path,
        _env(index),
        COLLECT_WITHIN_S,
    )
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert errors == [
        "ERROR: --raychaos-ray-version (from --raychaos-ray-version): expected a Ray release "
        "with cp311 manylinux wheels on the configured package index, got '2.60.2' — nearest "
        f"on the package index: 2.60.0, {VERSION} (newest {VERSION}); a build of your own: "
        "--raychaos-ray-wheel PATH"
    ], done.stderr


def test_a_wheel_of_ones_own_is_the_runs_release(index: Path, tmp_path: Path) -> None:
    (tmp_path / "test_it.py").write_text(USES_THE_RELEASE)
    [wheel] = index.glob(f"ray-{VERSION}-*.whl")
    env = {**_env(index), "PIP_FIND_LINKS": str(tmp_path / "nothing")}  # no index at all
    done = _pytest(
        ["-q", "-s", "test_it.py", f"--raychaos-ray-wheel={wheel}"], tmp_path, env, COLLECT_WITHIN_S
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"RELEASE {VERSION}" in done.stdout, done.stdout


@pytest.mark.skipif(
    os.environ.get("RAYCHAOS_SLOW_RELEASE_BOOT") != "1",
    reason="boots three clusters on an image built from the local index (~3.5-5.5 min): "
    "RAYCHAOS_SLOW_RELEASE_BOOT=1 runs it",
)
def test_the_experiments_boot_on_a_release_only_the_index_has(index: Path, tmp_path: Path) -> None:
    alluredir = tmp_path / "allure"
    done = _pytest(
        [
            "-q",
            "experiments/test_tasks.py",
            f"--raychaos-ray-version={VERSION}",
            f"--alluredir={alluredir}",
        ],
        ROOT,
        _env(index),
        BOOT_WITHIN_S,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    # TASK-04/05's experiment is an intermittent finding (FailureCauseRaceLost): a run that
    # lost Ray's race is skipped (xfailed) in Allure, one that won passes.
    statuses = {r["name"]: r["status"] for r in results}
    assert len(statuses) == 3, statuses
    assert all(
        status == "passed" or ("node_death" in name and status == "skipped")
        for name, status in statuses.items()
    ), statuses
    environment = (alluredir / "environment.properties").read_text()
    assert f"ray.expectations=Ray {VERSION} is newer than every release" in environment
