"""The harness's own tests: unit (no Docker), plugin (pytester), integration (real Docker)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


#: The longest harness tests (seconds on this 2-core machine, 5 December 2026, images cached
#: or built once), started first so that at ``-n 2`` the short ones fill in around them
#: (longest processing time first); CI hands tests out one at a time (``--maxschedchunk 1``).
LONGEST_FIRST = (
    ("test_team_images.py::test_a_team_image_boots_and_passes[system", 226),
    ("test_team_images.py::test_a_team_image_boots_and_passes[conda", 162),
    ("test_team_images.py::test_a_team_image_boots_and_passes[venv", 142),
    ("test_team_images.py::test_an_image_without_iptables", 89),
)
#: test_engines.py (106 s and 48 s for its two longest) keeps its file order: a later test
#: there finds what an earlier one put on the second engine, and the image-carrying test
#: must see that engine before anything else has carried the image to it.


def _rank(item: pytest.Item) -> int:
    return next(
        (i for i, (name, _) in enumerate(LONGEST_FIRST) if name in item.nodeid),
        len(LONGEST_FIRST),
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
    items.sort(key=_rank)  # stable: every other test keeps its place
