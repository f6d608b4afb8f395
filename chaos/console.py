"""The real terminal: a line written past pytest's capture and an xdist worker's pipes.

Progress that a person waits on (an image build, a release lookup, a postcondition) must
reach them even from inside a test; ``sys.__stderr__`` is the stream pytest leaves alone
(an xdist worker's stderr is the controller's terminal).
"""

from __future__ import annotations

import sys


def write(line: str) -> None:
    """``line`` to the real standard error, flushed."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(line + "\n")
    stream.flush()


def progress(line: str) -> None:
    """A raychaos progress line: ``[raychaos] <line>`` on the real terminal."""
    write(f"[raychaos] {line}")
