"""What the plugin keeps in ``config.stash``: one home, so the plugin and the report hooks
share it without importing each other."""

from __future__ import annotations

import pytest

from chaos.settings import Settings

SETTINGS_KEY = pytest.StashKey[Settings]()
RUN_ID_KEY = pytest.StashKey[str]()
#: True once collection found a test that uses a raychaos fixture or marker.
USED_KEY = pytest.StashKey[bool]()
PHASE_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
