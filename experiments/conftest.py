"""The suite's own fixtures, wherever it is collected from (a checkout or an installed wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The workloads the experiments name (``workloads.nodes:node_death`` …), next to this file.
WORKLOADS = Path(__file__).parent / "workloads"
#: The marker of runs too long for the nightly suite (CHURN's ten-minute schedule).
LONG = "long_run"


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long runs stay out of the nightly suite unless ``-m`` asks for them by name."""
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
