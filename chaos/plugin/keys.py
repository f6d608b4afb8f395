"""What the plugin keeps in ``config.stash`` and ``item.stash``: one home, so its hook modules
share it without importing each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from chaos.backends.base import Engine
from chaos.plugin.settings import Settings

if TYPE_CHECKING:
    from chaos.experiment import Experiment
    from chaos.plugin.factory import ClusterFactory

SETTINGS_KEY = pytest.StashKey[Settings]()
RUN_ID_KEY = pytest.StashKey[str]()
#: True once collection found a test that uses a raychaos fixture or marker.
USED_KEY = pytest.StashKey[bool]()
PHASE_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
#: The engine a test's clusters run on, set by the ``ray_cluster_factory`` fixture.
ENGINE_KEY = pytest.StashKey[Engine]()
#: Set when a fixture's teardown failed (a postcondition): the test failed, though no report
#: says so yet when the clusters are torn down.
TEARDOWN_FAILED = pytest.StashKey[bool]()
#: The test's cluster factory and experiment kit (the evidence of the test body is attached
#: by a hook around the call, which has no fixture values of its own).
FACTORY_KEY: pytest.StashKey[ClusterFactory] = pytest.StashKey()
EXPERIMENT_KEY: pytest.StashKey[Experiment] = pytest.StashKey()
#: Why a test's verdict is inconclusive (the stall named), set when the body ends.
INCONCLUSIVE_KEY = pytest.StashKey[str]()
#: The test this process runs after the current one (None: the last, or not yet known).
NEXT_ITEM = pytest.StashKey["pytest.Item | None"]()
