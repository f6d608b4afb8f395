"""The files of an Allure results directory, read one way by every reader.

The page, the coverage and compare commands, the suite bench and the run-level files all read
the same JSON files; a file that cannot be read is named (or skipped), never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: What allure-pytest writes per test, and per fixture scope (set-ups and teardowns).
RESULT = "result"
CONTAINER = "container"


def allure_files(directory: Path, kind: str = RESULT) -> list[Path]:
    """The ``*-result.json`` (or ``*-container.json``) files of ``directory``, by name."""
    return sorted(directory.glob(f"*-{kind}.json"))


def read_json(path: Path, problems: list[str] | None = None) -> Any:
    """The JSON in ``path``. When it cannot be read or parsed: None, and why appended to
    ``problems``; without ``problems`` the OSError or ValueError propagates."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        if problems is None:
            raise
        problems.append(f"{path.name}: {exc}")
        return None


def read_objects(directory: Path, kind: str, problems: list[str]) -> Iterator[dict[str, Any]]:
    """Each readable ``kind`` file of ``directory`` that holds a JSON object, by name."""
    for path in allure_files(directory, kind):
        data = read_json(path, problems)
        if isinstance(data, dict):
            yield data
