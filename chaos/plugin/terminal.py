"""One line on the real terminal from anywhere in the plugin, even inside pytest's capture."""

from __future__ import annotations

import contextlib

import pytest

from chaos import console

#: The running session's config (set by :mod:`chaos.plugin.options` at configure time).
_CONFIG: list[pytest.Config] = []


def attach_config(config: pytest.Config) -> None:
    _CONFIG[:] = [config]


def say(text: str) -> None:
    """A line on the real terminal, even from inside pytest's capture or an xdist worker.

    pytest captures file descriptor 2 while fixtures run, so writing to ``sys.__stderr__``
    lands in the capture and is lost for a passing test: capture is suspended for the line.
    (An xdist worker's stderr is the controller's terminal.)
    """
    capman = _CONFIG[0].pluginmanager.get_plugin("capturemanager") if _CONFIG else None
    suspended = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
    with suspended:
        console.write(text)
