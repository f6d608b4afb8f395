"""``raychaos bench nights``: per-claim verdict counts over several runs, stalls named."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from chaos.bench.nights import bench_nights
from chaos.report.catalogue import load_catalogue
from chaos.report.claims import (
    FINDING_ABOUT_LABEL,
    FINDING_LABEL,
    INCONCLUSIVE_LABEL,
    PARAMETER,
    SCHEMA,
    SCHEMA_LABEL,
)
from chaos.report.coverage import coverage, load_raychaos, render_text

STALL = "worker-1 stalled 4.2 s of the 5.0 s from 10:00:01 UTC (84%), in the 60.0 s judged window"


def _result(
    directory: Path,
    name: str,
    claims: tuple[str, ...],
    status: str,
    labels: tuple[tuple[str, str], ...] = (),
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "uuid": str(uuid.uuid4()),
        "name": name,
        "fullName": f"experiments.test_x#{name}",
        "historyId": name,
        "status": status,
        "statusDetails": {"message": "m"},
        "start": 1,
        "stop": 2,
        "labels": [
            {"name": SCHEMA_LABEL, "value": SCHEMA},
            *({"name": "claim", "value": c} for c in claims),
            *({"name": n, "value": v} for n, v in labels),
        ],
        "parameters": [{"name": PARAMETER, "value": "'2.60.0'", "excluded": True}],
    }
    (directory / f"{data['uuid']}-result.json").write_text(json.dumps(data))


def test_nights_count_each_verdict_and_name_each_stall(tmp_path: Path) -> None:
    one, two, three = tmp_path / "n1", tmp_path / "n2", tmp_path / "n3"
    _result(one, "t_tasks", ("TASK-01",), "passed")
    _result(two, "t_tasks", ("TASK-01",), "broken", ((INCONCLUSIVE_LABEL, STALL),))
    _result(three, "t_tasks", ("TASK-01",), "failed")
    for night in (one, two, three):
        _result(night, "t_gcs", ("GCS-02",), "broken", ((INCONCLUSIVE_LABEL, STALL),))
        _result(
            night, "t_spot", ("CHURN-03", "CHURN-05"), "skipped",
            ((FINDING_LABEL, "PreemptionRetryCounted"), (FINDING_ABOUT_LABEL, "CHURN-05")),
        )  # fmt: skip
    found = bench_nights([one, two, three], load_catalogue())
    rows = {r.claim: r for r in found.rows}
    assert dict(rows["TASK-01"].counts) == {"passed": 1, "inconclusive": 1, "failed": 1}
    assert rows["TASK-01"].stalls == [f"{two}: {STALL}"]
    assert rows["GCS-02"].always_inconclusive
    # Per claim: the finding is CHURN-05's; CHURN-03 was never recorded held, so not judged.
    assert dict(rows["CHURN-05"].counts) == {"finding": 3}
    assert dict(rows["CHURN-03"].counts) == {"not judged": 3}
    text = found.text()
    assert "inconclusive in every run: GCS-02 [2.60.0]" in text
    assert "passed in some runs and failed or broke in others: TASK-01 [2.60.0]" in text
    assert STALL in text


def test_an_inconclusive_claim_is_listed_and_never_fails_coverage(tmp_path: Path) -> None:
    night = tmp_path / "n"
    _result(night, "t_gcs", ("GCS-02",), "broken", ((INCONCLUSIVE_LABEL, STALL),))
    _result(night, "t_tasks", ("TASK-01",), "passed")
    cov = coverage(load_raychaos(night), load_catalogue(), ["GCS-02", "TASK-01"])
    assert cov.cell("GCS-02", "2.60.0").verdict == "inconclusive"
    assert cov.inconclusive() == ("GCS-02",)
    assert cov.exit_code(strict=False) == 0
    assert "inconclusive (the host too busy to judge" in render_text(cov, strict=False)
    _result(night, "t_tasks2", ("TASK-01",), "failed")
    cov = coverage(load_raychaos(night), load_catalogue(), ["GCS-02", "TASK-01"])
    assert cov.exit_code(strict=False) == 1
