"""HTML text of the report's pages: one escaping rule for every section."""

from __future__ import annotations

import html


def escape(value: object) -> str:
    """``value`` as HTML text, quotes included (it also fills attributes)."""
    return html.escape(str(value), quote=True)
