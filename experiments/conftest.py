"""The suite's own fixtures, wherever it is collected from (a checkout or an installed wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The workloads the experiments name (``workloads.nodes:node_death`` …), next to this file.
WORKLOADS = Path(__file__).parent / "workloads"
#: The marker of runs too long for the nightly suite (CHURN's ten-minute schedule).
LONG = "long_run"
#: The longest experiments (seconds of body in CI's clean-clone run of 5 December 2026, `-n 3`,
#: Ray 2.60.0), started first: with xdist's ``load`` they go out in the first round, so no
#: worker is left with one of them while the others have finished (longest processing time
#: first). Every other experiment keeps its collection order.
LONGEST_FIRST = (
    ("test_serve_health.py::test_failing_health_checks_and_deployments_that_cannot_start", 146),
    ("test_pending.py::test_pending_requests_wait_and_app_errors_do_not", 139),
    ("test_churn.py::test_steady_work_under_a_seeded_killer", 137),
    ("test_scheduling.py::test_spread_hybrid_head_only_resource_and_affinity", 125),
    ("test_serve_gcs.py::test_gcs_outage_keeps_serving_through_worker_proxies", 109),
)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, not only in raychaos's pyproject: a repository running the installed
    # suite under --strict-markers has its own configuration.
    config.addinivalue_line(
        "markers", "ray_env(env): RAY_* knobs an experiment module applies to its cluster"
    )
    config.addinivalue_line(
        "markers",
        f"{LONG}: a run of ten minutes or more; collected only when -m names it "
        f"(pytest experiments/ -m {LONG})",
    )


def _rank(item: pytest.Item) -> int:
    return next(
        (i for i, (name, _) in enumerate(LONGEST_FIRST) if name in item.nodeid),
        len(LONGEST_FIRST),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long runs stay out of the nightly suite unless ``-m`` asks for them by name; the
    longest experiments go first."""
    items.sort(key=_rank)  # stable: every other experiment keeps its place
    if LONG in (config.getoption("markexpr", "") or ""):
        return
    kept = [i for i in items if i.get_closest_marker(LONG) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


@pytest.fixture
def raychaos_workload_paths() -> tuple[Path, ...]:
    """Ship this suite's ``workloads`` package, not whatever the rootdir or ini points at."""
    return (WORKLOADS,)
