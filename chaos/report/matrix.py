"""The claims matrix (claim id × Ray version → the worst result) and measured windows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from chaos.report.model import GONE, MEASUREMENTS, TestResult

#: A cell shows the worst result among its tests; worst first. A finding that no longer
#: reproduces asks for an edit (its marker), not an investigation: after failed and broken.
STATUS_ORDER = ("failed", "broken", GONE, "finding", "skipped", "unknown", "passed")
NOT_RUN = "not run"


@dataclass(frozen=True)
class Cell:
    status: str
    #: (test name, effective status) of every test behind the cell.
    tests: tuple[tuple[str, str], ...] = ()


def worst(statuses: Iterable[str]) -> str:
    ranked = [s for s in statuses if s in STATUS_ORDER]
    return min(ranked, key=STATUS_ORDER.index) if ranked else NOT_RUN


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-]", version))


def versions_of(tests: Iterable[TestResult]) -> list[str]:
    found = {t.ray_version for t in tests if t.claims and t.ray_version}
    return sorted(found, key=_version_key) or ["—"]


def claim_matrix(
    tests: Sequence[TestResult], claim_ids: Sequence[str], versions: Sequence[str]
) -> dict[tuple[str, str], Cell]:
    """(claim, Ray version) → the worst result of the tests carrying that claim."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for test in tests:
        version = test.ray_version or versions[0]
        for claim in test.claims:
            found.setdefault((claim, version), []).append((test.name, test.effective_status))
    every = list(dict.fromkeys([*claim_ids, *(c for c, _ in found)]))
    return {
        (claim, version): Cell(
            worst(s for _, s in found.get((claim, version), [])),
            tuple(found.get((claim, version), [])),
        )
        for claim in every
        for version in versions
    }


def measurements_of(test: TestResult, blobs: Mapping[str, bytes]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for attachment in test.attachments:
        if attachment.name != MEASUREMENTS or attachment.source not in blobs:
            continue
        try:
            data = json.loads(blobs[attachment.source])
        except ValueError:
            continue
        if isinstance(data, dict):
            rows += [(str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in data.items()]
    return rows
