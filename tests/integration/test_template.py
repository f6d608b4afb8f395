"""The recipe's template experiment (docs/template) runs as a new user would run it: copied to
a directory outside the checkout, importing only the author's surface, its workload shipped
by its own ``pytest.ini``; it passes and records its claim's verdict."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "template"


def test_the_template_runs_outside_the_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "team-repo"
    shutil.copytree(TEMPLATE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    alluredir = tmp_path / "allure"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--alluredir={alluredir}",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "2 passed" in output, output[-2000:]
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    experiment = next(
        r for r in results if r["name"].endswith("test_a_killed_worker_process_is_retried[2.60.0]")
    )
    steps = [s["name"] for s in experiment.get("steps", [])]
    assert any(s.startswith("verdict: TASK-01 held") for s in steps), steps
    claims = {x["value"] for x in experiment["labels"] if x["name"] == "claim"}
    assert claims == {"TASK-01", "INV-01", "INV-02"}, claims  # with the postconditions
