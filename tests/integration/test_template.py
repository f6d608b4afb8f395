"""The recipe's template experiment (docs/template) and a team's repository as docs/teams.md
shows it, run as a new user would: copied to a directory outside the checkout, importing only
the author's surface, workloads shipped by their own ``pytest.ini``. The template judges a
team's claim (ACME-02) and the page's job runs under the nightly killer (ACME-01); both pass
and record their claims' verdicts, the claims file is copied beside the results, and
``raychaos coverage`` counts the team's claims told nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "docs" / "template"
TEAMS = ROOT / "docs" / "teams.md"
#: A fenced block whose first line names its file (``# test_nightly.py``).
BLOCK = re.compile(r"^```(?:python|toml)\n# (\S+)\n(.*?)^```", re.M | re.S)


def team_repo(repo: Path) -> dict[str, str]:
    """The template, then every file docs/teams.md shows, written into ``repo``."""
    shutil.copytree(TEMPLATE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    files = {name: body for name, body in BLOCK.findall(TEAMS.read_text(encoding="utf-8"))}
    assert {"claims.toml", "test_nightly.py", "my_workloads/steady.py"} <= set(files), files
    for name, body in files.items():
        (repo / name).write_text(body, encoding="utf-8")
    ini = repo / "pytest.ini"
    ini.write_text(ini.read_text() + "raychaos_claims_file = claims.toml\n")
    test = repo / "test_template.py"
    test.write_text(test.read_text().replace('CLAIM = "TASK-01"', 'CLAIM = "ACME-02"'))
    return files


def result_of(results: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(r for r in results if r["name"].endswith(f"{name}[2.60.0]"))


def held(result: dict[str, Any], claim: str) -> bool:
    return any(s["name"].startswith(f"verdict: {claim} held") for s in result.get("steps", []))


def test_the_template_and_a_teams_repository_run_outside_the_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "team-repo"
    files = team_repo(repo)
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
    assert "3 passed" in output, output[-2000:]
    results = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    template = result_of(results, "test_a_killed_worker_process_is_retried")
    nightly = result_of(results, "test_batches_survive_the_nightly_killer")
    assert held(template, "ACME-02") and held(nightly, "ACME-01"), (template, nightly)
    labels = {(x["name"], x["value"]) for x in template["labels"]}
    claims = {value for name, value in labels if name == "claim"}
    assert claims == {"ACME-02", "INV-01", "INV-02"}, claims  # with the postconditions
    assert ("feature", "Acme batch jobs") in labels and ("severity", "critical") in labels, labels
    # The seed is on the result, and the schedule it built struck.
    seed = {p["name"]: p["value"] for p in nightly["parameters"]}.get("seed")
    assert seed is not None, nightly["parameters"]
    assert (alluredir / "raychaos-claims.toml").read_text(encoding="utf-8") == files["claims.toml"]
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
    assert "2 verified" in coverage.stdout, coverage.stdout
