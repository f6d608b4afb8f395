"""Ray release comparisons, for claims whose expected outcome changed between releases."""

from __future__ import annotations

from collections.abc import Sequence

from chaos.spec import releases


def at_least(version: str, floor: str) -> bool:
    """``version`` >= ``floor`` for Ray release strings such as '2.59.0' (PEP 440 order)."""
    return releases.release_key(version) >= releases.release_key(floor)


def skew_partner(version: str, run_versions: Sequence[str], skew_from: str = "") -> str:
    """The other release of a version-skew experiment on ``version``.

    ``--raychaos-skew-from`` when given; else another release of the run (an upgrade check
    runs both sides, so each is skewed against the other); else the release before it.
    """
    if skew_from and skew_from != version:
        return skew_from
    others = [v for v in run_versions if v != version]
    if others:
        return others[0]
    # A release raychaos does not list (from the index, or a wheel) sorts among those it does.
    known = releases.shipped()
    older = [v for v in known if releases.release_key(v) < releases.release_key(version)]
    newer = [v for v in known if releases.release_key(v) > releases.release_key(version)]
    return older[-1] if older else newer[0]
