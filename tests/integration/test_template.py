"""The recipe's template experiment (docs/template) runs as a new user would run it: copied to
a directory outside the checkout, importing only the author's surface, its workload shipped
by its own ``pytest.ini``; it passes and records its claim's verdict. The copy judges a team's
own claim (docs/teams.md: a claims file named in the ini), so the same boot proves that a
team's claim is labelled, copied beside the results and counted by ``raychaos coverage``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "template"
#: A team's claims file, as docs/teams.md shows it.
TEAM_CLAIMS = """
[[family]]
id = "ACME"
feature = "Acme jobs"
doc = "https://wiki.acme.example/ray/jobs"
severity = "critical"

[[claim]]
id = "ACME-01"
family = "ACME"
fault = "a worker process of the job is killed"
outcome = "the task comes back from its retry"
doc = "https://wiki.acme.example/ray/jobs#retries"
source = "Acme runbook"
"""


def test_the_template_runs_outside_the_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "team-repo"
    shutil.copytree(TEMPLATE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "claims.toml").write_text(TEAM_CLAIMS, encoding="utf-8")
    ini = repo / "pytest.ini"
    ini.write_text(ini.read_text() + "raychaos_claims_file = claims.toml\n")
    test = repo / "test_template.py"
    test.write_text(test.read_text().replace('CLAIM = "TASK-01"', 'CLAIM = "ACME-01"'))
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
    assert any(s.startswith("verdict: ACME-01 held") for s in steps), steps
    labels = {(x["name"], x["value"]) for x in experiment["labels"]}
    claims = {value for name, value in labels if name == "claim"}
    assert claims == {"ACME-01", "INV-01", "INV-02"}, claims  # with the postconditions
    assert ("feature", "Acme jobs") in labels and ("severity", "critical") in labels, labels
    assert (alluredir / "raychaos-claims.toml").read_text(encoding="utf-8") == TEAM_CLAIMS
    # The readers find the team's claims beside the results, told nothing.
    env = {k: v for k, v in os.environ.items() if k != "RAYCHAOS_CLAIMS_FILE"}
    coverage = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "coverage", str(alluredir), "--claims", "ACME-*"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    assert "1 verified" in coverage.stdout, coverage.stdout
