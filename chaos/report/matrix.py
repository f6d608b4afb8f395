"""The claims matrix (claim id × Ray version → the worst result) and measured windows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from chaos.report.coverage import NOT_JUDGED, verdict_for, verdict_of
from chaos.report.model import GONE, INCONCLUSIVE, MEASUREMENTS, TestResult
from chaos.spec.releases import sort_releases

#: A cell shows the worst result among its tests; worst first. A finding that no longer
#: reproduces asks for an edit (its marker), not an investigation: after failed and broken. An
#: inconclusive run (a host too busy to judge) said nothing about Ray: after a skip.
STATUS_ORDER = ("failed", "broken", GONE, "finding", "skipped", INCONCLUSIVE, "unknown", "passed")
NOT_RUN = "not run"


@dataclass(frozen=True)
class Cell:
    status: str
    #: (test name, effective status) of every test behind the cell.
    tests: tuple[tuple[str, str], ...] = ()
    #: Names of tests that carry the claim but did not judge it (a postcondition after a
    #: failed body: :func:`chaos.report.coverage.verdict_for`).
    unjudged: tuple[str, ...] = ()


def worst(statuses: Iterable[str]) -> str:
    ranked = [s for s in statuses if s in STATUS_ORDER]
    return min(ranked, key=STATUS_ORDER.index) if ranked else NOT_RUN


def versions_of(tests: Iterable[TestResult]) -> list[str]:
    found = {t.ray_version for t in tests if t.claims and t.ray_version}
    return sort_releases(found) or ["—"]


def _status_for(claim: str, test: TestResult) -> str:
    """``test``'s status on ``claim``: its own, unless it judged the claim otherwise (a
    postcondition after a finding held; one never checked is not judged)."""
    verdict = verdict_for(claim, test)
    return test.effective_status if verdict == verdict_of(test) else verdict


def claim_matrix(
    tests: Sequence[TestResult], claim_ids: Sequence[str], versions: Sequence[str]
) -> dict[tuple[str, str], Cell]:
    """(claim, Ray version) → the worst result of the tests that judged that claim."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for test in tests:
        version = test.ray_version or versions[0]
        for claim in test.claims:
            found.setdefault((claim, version), []).append((test.name, _status_for(claim, test)))
    every = list(dict.fromkeys([*claim_ids, *(c for c, _ in found)]))
    cells = {}
    for claim in every:
        for version in versions:
            both = found.get((claim, version), [])
            judged = tuple((n, s) for n, s in both if s != NOT_JUDGED)
            unjudged = tuple(n for n, s in both if s == NOT_JUDGED)
            status = worst(s for _, s in judged) if judged or not unjudged else NOT_JUDGED
            cells[(claim, version)] = Cell(status, judged, unjudged)
    return cells


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
