"""The harness's own tests: unit (no Docker), plugin (pytester), integration (real Docker)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
