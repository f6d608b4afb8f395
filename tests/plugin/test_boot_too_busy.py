"""A boot on a host too busy to boot it is inconclusive, not broken (no Docker).

``HostTooBusy`` is what :func:`chaos.cluster.readiness.wait_ready` raises when a boot timed
out while its nodes were stalled past the threshold; the suite below raises it where a real
boot would — in a fixture (the test's cluster) and in the body (a node the body adds) —
beside a boot that timed out on an idle host, which stays a harness error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.report.model import load_results

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

STALL = (
    "worker-1 stalled 12.4 s of the 15.0 s from 22:45:58 UTC (83%), in the 180.0 s judged window"
)

SUITE = f"""
import pytest
from chaos.errors import ClusterBootTimeout, HostTooBusy

STALL = {STALL!r}


@pytest.fixture
def stalled_boot():
    raise HostTooBusy("the host was too busy to boot: " + STALL, stall=STALL)


@pytest.mark.claim("NODE-01")
def test_boot_stalled(stalled_boot):
    pass


@pytest.mark.claim("TASK-01")
def test_added_node_stalled():
    raise HostTooBusy("the host was too busy to boot: " + STALL, stall=STALL)


@pytest.mark.claim("ACTOR-01")
def test_boot_timed_out_idle():
    raise ClusterBootTimeout("cluster cluster not ready: not all nodes ALIVE after 180 s")
"""


def test_a_stalled_boot_is_inconclusive_and_an_idle_one_broken(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_suite=SUITE)
    alluredir = pytester.path / "allure-results"
    run = pytester.runpytest_subprocess(f"--alluredir={alluredir}", "-p", "no:cacheprovider", "-rs")
    # pytest: the stalled boots are skips (the run's exit status stays Ray's), the idle one fails.
    run.assert_outcomes(skipped=2, failed=1)
    run.stdout.fnmatch_lines(["*INCONCLUSIVE: the host was too busy to boot: worker-1 stalled*"])
    results = {r.name.split("] ", 1)[-1]: r for r in load_results(alluredir).tests}
    for name in ("test_boot_stalled", "test_added_node_stalled"):
        result = results[name]
        assert result.status == "broken", (name, result.status)
        assert result.inconclusive == STALL, name
        assert result.message.startswith("INCONCLUSIVE: the host was too busy to boot"), name
    idle = results["test_boot_timed_out_idle"]
    assert (idle.status, idle.inconclusive) == ("broken", None)
    raw = [json.loads(p.read_text()) for p in Path(alluredir).glob("*-result.json")]
    assert len(raw) == 3
