"""Raw evidence kept in a repository: every run's verdict and measured values, per claim family.

``raychaos evidence RESULTS… --out DIR`` reads Allure results directories and merges one record
per test run into ``DIR/<family>.json`` (``task.json``, ``gcs.json``…): the claim ids, the
test, the Ray release, when it ran, its effective status (passed / finding / failed / broken /
skipped), each claim's own verdict (:func:`chaos.report.coverage.verdict_for`: a finding about
one claim leaves another passed where the body recorded it held, else not judged), the first
line of its message and its measurements. A record is keyed by the Allure
result's uuid, so exporting the same directory twice adds nothing. The files are the raw
values the evidence notes in ``docs/evidence/`` quote; a note can be checked against them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError
from chaos.report.coverage import verdict_for
from chaos.report.model import Results, load_results
from chaos.report.stats import measurements

#: The file format's version, written into every file so a reader can refuse a newer one.
FORMAT = 1


@dataclass(frozen=True)
class Record:
    """One test run, as kept in the repository."""

    uuid: str
    claims: tuple[str, ...]
    test: str
    ray_version: str
    started: str
    seconds: float
    status: str
    message: str
    measurements: Mapping[str, Any]
    #: Claim id → this run's verdict on it (passed, finding, failed, broken, skipped, not
    #: judged…): the run's status is the test's, this is each claim's. Records exported
    #: before per-claim verdicts have none.
    verdicts: Mapping[str, str] = field(default_factory=dict)


def family_of(claim: str) -> str:
    return claim.split("-", 1)[0].lower()


def records(results: Results) -> list[Record]:
    """One record per raychaos run in ``results`` (repeated trials and retries included)."""
    found = []
    for test in results.runs:
        if not test.claims or not test.ray_version:
            continue  # not a raychaos experiment
        started = datetime.fromtimestamp(test.start / 1000, tz=UTC) if test.start else None
        found.append(
            Record(
                uuid=test.uuid,
                claims=test.claims,
                test=test.name,
                ray_version=test.ray_version,
                started=started.isoformat(timespec="seconds") if started else "",
                seconds=round(max(test.stop - test.start, 0) / 1000, 1),
                status=test.effective_status,
                message=(test.message.strip().splitlines() or [""])[0][:400],
                measurements=measurements(test, results.blobs),
                verdicts={c: verdict_for(c, test) for c in test.claims},
            )
        )
    return found


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ChaosError(
            f"expected {path} to be raychaos evidence JSON, could not read it: {exc}",
            hint="fix or move the file; raychaos only merges into files it wrote",
        ) from None
    if not (isinstance(data, dict) and data.get("format") == FORMAT):
        raise ChaosError(
            f"expected {path} to be raychaos evidence (format {FORMAT}), it is something else",
            hint="choose another --out directory; raychaos never overwrites files it did not write",
        )
    runs = data.get("runs")
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def merge(out: Path, found: Iterable[Record]) -> dict[str, int]:
    """Add ``found`` to ``out/<family>.json``; returns how many records each file gained."""
    by_family: dict[str, list[Record]] = {}
    for record in found:
        for fam in sorted({family_of(c) for c in record.claims}):
            by_family.setdefault(fam, []).append(record)
    # Read (and refuse foreign files) before writing anything.
    existing = {fam: _read(out / f"{fam}.json") for fam in by_family}
    out.mkdir(parents=True, exist_ok=True)
    added: dict[str, int] = {}
    for fam, new in sorted(by_family.items()):
        runs = existing[fam]
        known = {str(r.get("uuid")) for r in runs}
        fresh = [asdict(r) for r in new if r.uuid not in known]
        runs = sorted([*runs, *fresh], key=lambda r: (str(r.get("started")), str(r.get("test"))))
        (out / f"{fam}.json").write_text(
            json.dumps({"format": FORMAT, "family": fam.upper(), "runs": runs}, indent=1) + "\n",
            encoding="utf-8",
        )
        added[fam] = len(fresh)
    return added


def export(directories: Sequence[Path], out: Path) -> dict[str, int]:
    found = [r for d in directories for r in records(load_results(d))]
    if not found:
        raise ChaosError(
            f"expected raychaos results in {', '.join(map(str, directories))}, found none",
            hint="run the experiments with --alluredir DIR first",
        )
    return merge(out, found)
