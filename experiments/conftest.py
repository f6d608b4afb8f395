"""The suite's own fixtures, wherever it is collected from (a checkout or an installed wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: The workloads the experiments name (``workloads.nodes:node_death`` …), next to this file.
WORKLOADS = Path(__file__).parent / "workloads"


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, not only in raychaos's pyproject: a repository running the installed
    # suite under --strict-markers has its own configuration.
    config.addinivalue_line(
        "markers", "ray_env(env): RAY_* knobs an experiment module applies to its cluster"
    )


@pytest.fixture
def raychaos_workload_paths() -> tuple[Path, ...]:
    """Ship this suite's ``workloads`` package, not whatever the rootdir or ini points at."""
    return (WORKLOADS,)
