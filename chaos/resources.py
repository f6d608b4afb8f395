"""Where the data shipped with the package lives (``fixtures/`` installed as ``chaos/fixtures``)."""

from __future__ import annotations

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
