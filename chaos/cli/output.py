"""What ``raychaos`` writes to the terminal: every command's lines go through here.

Results (tables, JSON, Markdown) go to stdout, so they pipe; what was done goes to stdout as
``raychaos: …``; progress, warnings and hints go to stderr, so they never mix into a result.
"""

from __future__ import annotations

import sys

PREFIX = "raychaos: "


def out(text: str, end: str = "\n") -> None:
    """A result, as is, on stdout."""
    print(text, end=end)


def err(text: str) -> None:
    """A progress line, as is, on stderr."""
    print(text, file=sys.stderr)


def say(text: str) -> None:
    """``raychaos: text`` on stdout: what a command did."""
    out(PREFIX + text)


def note(text: str) -> None:
    """``raychaos: text`` on stderr: how it went, a warning, what to try."""
    err(PREFIX + text)
