"""``raychaos bench nights``: flake accounting over several runs (nights) of the suite.

Per claim and release: in how many runs it was verified, failed, a finding, inconclusive
(the host too busy to judge, with the stall that made it so) or anything else, from the
Allure results directories of those runs, oldest first. A claim that is inconclusive night
after night is listed as such: inconclusive is a verdict, never a hidden one.

Verdicts are per claim (:func:`chaos.report.coverage.verdict_for`); a claim's verdict in one
run is its cell's, the worst of its tests'.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.report.catalogue import Catalogue
from chaos.report.coverage import (
    BROKEN,
    FAILED,
    FINDING,
    NOT_JUDGED,
    PASSED,
    SKIPPED,
    XPASS,
    cells_of,
    load_raychaos,
    raychaos_tests,
    releases_of,
)
from chaos.report.model import INCONCLUSIVE

#: The columns, in the order a reader scans them: the good, the findings, the undecided, the bad.
COLUMNS = (PASSED, FINDING, INCONCLUSIVE, NOT_JUDGED, SKIPPED, FAILED, BROKEN, XPASS)


@dataclass
class ClaimNights:
    """One claim on one release across the runs."""

    claim: str
    release: str
    #: verdict → runs that gave it.
    counts: Counter[str] = field(default_factory=Counter)
    #: One line per inconclusive run: the run's directory and the stall it named.
    stalls: list[str] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(self.counts.values())

    @property
    def always_inconclusive(self) -> bool:
        return self.runs > 1 and self.counts[INCONCLUSIVE] == self.runs


@dataclass(frozen=True)
class Nights:
    directories: tuple[Path, ...]
    rows: tuple[ClaimNights, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [str(d) for d in self.directories],
            "claims": [
                {
                    "claim": r.claim,
                    "release": r.release,
                    "runs": r.runs,
                    **{c: r.counts[c] for c in COLUMNS},
                    "stalls": r.stalls,
                }
                for r in self.rows
            ],
        }

    def text(self) -> str:
        width = max([len(r.claim) for r in self.rows] + [5]) + 2
        head = "claim".ljust(width) + "release".ljust(10) + "runs  "
        lines = [
            f"raychaos bench nights: {len(self.directories)} run(s), "
            + ", ".join(str(d) for d in self.directories),
            "",
            head + "  ".join(c for c in COLUMNS),
        ]
        for r in self.rows:
            cells = "  ".join(str(r.counts[c]).rjust(len(c)) for c in COLUMNS)
            lines.append(
                f"{r.claim.ljust(width)}{r.release.ljust(10)}{str(r.runs).rjust(4)}  {cells}"
            )
        totals = Counter[str]()
        for r in self.rows:
            totals.update(r.counts)
        lines += ["", "claim-runs: " + ", ".join(f"{totals[c]} {c}" for c in COLUMNS)]
        stalled = [r for r in self.rows if r.stalls]
        if stalled:
            lines += ["", "inconclusive (the host too busy to judge), and the stall each named:"]
            for r in stalled:
                lines += [f"  {r.claim} [{r.release}]: {s}" for s in r.stalls]
        always = [f"{r.claim} [{r.release}]" for r in self.rows if r.always_inconclusive]
        if always:
            lines.append(f"inconclusive in every run: {', '.join(always)}")
        flaky = [
            f"{r.claim} [{r.release}]"
            for r in self.rows
            if r.counts[PASSED] and (r.counts[FAILED] or r.counts[BROKEN])
        ]
        if flaky:
            lines.append(f"passed in some runs and failed or broke in others: {', '.join(flaky)}")
        return "\n".join(lines)


def bench_nights(directories: Sequence[Path], catalogue: Catalogue) -> Nights:
    """The claims of ``catalogue`` (and any other the results carry) over ``directories``."""
    rows: dict[tuple[str, str], ClaimNights] = {}
    for directory in directories:
        tests = raychaos_tests(load_raychaos(directory))
        for release in releases_of(tests):
            for claim, cell in cells_of(tests, release).items():
                row = rows.setdefault((claim, release), ClaimNights(claim, release))
                verdict = NOT_JUDGED if not cell.tests and cell.unjudged else cell.verdict
                row.counts[verdict] += 1
                if cell.verdict == INCONCLUSIVE:
                    deciding = cell.deciding()
                    stall = deciding.inconclusive if deciding is not None else None
                    row.stalls.append(f"{directory}: {stall or 'no stall recorded'}")
    order = {c: i for i, c in enumerate(catalogue.ids)}
    ranked = sorted(
        rows.values(), key=lambda r: (order.get(r.claim, len(order)), r.claim, r.release)
    )
    return Nights(tuple(directories), tuple(ranked))
