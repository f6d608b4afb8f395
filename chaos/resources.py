"""Where the data shipped with the package lives (``fixtures/`` installed as ``chaos/fixtures``)."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def fixtures_path(*parts: str) -> Path:
    """A path under the shipped fixtures (image recipe, topologies, Redis config).

    An installed wheel carries them as ``chaos/fixtures``; an editable checkout reads the
    repository's ``fixtures/`` directly (setuptools' editable finder does not map data dirs).
    """
    for root in (_PACKAGE / "fixtures", _PACKAGE.parent / "fixtures"):
        if root.is_dir():
            return root.joinpath(*parts)
    raise FileNotFoundError(f"raychaos fixtures not found under {_PACKAGE}; reinstall raychaos")


def agent_path() -> Path:
    """The agent package copied into every container (imported there as ``raychaos_agent``)."""
    return _PACKAGE / "agent" / "raychaos_agent"


def default_cache_dir() -> Path:
    """Wheelhouse, boot-slot locks and kept-cluster markers (``RAYCHAOS_CACHE_DIR``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("RAYCHAOS_CACHE_DIR", str(Path(root) / "raychaos")))
