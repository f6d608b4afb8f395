"""How a command line, an environment variable and an ini key spell a list: ``"a, b c"``.

Claim patterns (``--raychaos-claims``, ``raychaos claims``), releases and engine URLs are all
given this way, to the pytest plugin and to the command line alike.
"""

from __future__ import annotations

import re


def split_list(raw: str) -> list[str]:
    """``"a, b c"`` → ``["a", "b", "c"]``."""
    return [part for part in re.split(r"[,\s]+", raw) if part]
