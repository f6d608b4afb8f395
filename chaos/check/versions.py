"""Ray release comparisons, for claims whose expected outcome changed between releases."""

from __future__ import annotations


def at_least(version: str, floor: str) -> bool:
    """``version`` >= ``floor`` for Ray release strings such as '2.59.0'."""

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split(".")[:3])

    return parts(version) >= parts(floor)
