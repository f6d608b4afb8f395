"""The layout's rules, checked on the source.

The import rules are import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``):
the layers, the docker-py seam, and no import circle between siblings at any depth (lazy
imports inside functions count; imports for type checking only do not). The tests here run
them, show that each one fails on a violation, and check what import-linter cannot: roles are
packages, and no class is over ~300 lines.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "chaos"
ROLES = (
    "spec",
    "cluster",
    "backends",
    "workload",
    "nemesis",
    "observer",
    "check",
    "experiment",
    "report",
    "bench",
    "cli",
    "plugin",
)
#: Nothing flat at the top of chaos/ but the package's faces (``__init__`` and the author's
#: surface, ``testing``), errors and small shared utilities.
FACES = {"__init__", "testing"}
FLAT = FACES | {"console", "errors", "history", "labels", "resources", "steps", "waits"}
MAX_CLASS_LINES = 300
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_role_is_a_package_and_nothing_else_is_flat() -> None:
    assert all((PACKAGE / role / "__init__.py").is_file() for role in ROLES)
    flat = {p.stem for p in PACKAGE.glob("*.py")}
    assert flat <= FLAT, f"flat modules beyond the face and shared utilities: {flat - FLAT}"


def test_the_import_contracts_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout, result.stdout


def test_each_contract_breaks_on_a_violation(tmp_path: Path) -> None:
    """One violation per contract, in a copy of the package: all six are reported."""
    shutil.copytree(PACKAGE, tmp_path / "chaos", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "experiments", tmp_path / "experiments", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    violations = {
        "spec/topology.py": "import chaos.report.html",  # the model reaching up to a report
        "check/bands.py": "import docker",  # docker-py outside the Docker backend
        "cluster/node.py": "import chaos.cluster.cluster",  # node <-> cluster, a circle
        "report/matrix.py": "import pytest",  # a reader of results writing during a run
        "plugin/terminal.py": "import chaos.backends.docker.sweep",  # past the backend seam
    }
    for module, line in violations.items():
        with (tmp_path / "chaos" / module).open("a") as f:
            f.write(f"\n{line}  # noqa\n")
    # An experiment past the author's surface.
    with (tmp_path / "experiments" / "test_advice.py").open("a") as f:
        f.write("\nimport chaos.waits  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0 kept, 6 broken" in result.stdout, result.stdout
    assert "experiments.test_advice -> chaos.waits" in result.stdout
    assert "chaos.spec.topology -> chaos.report.html" in result.stdout
    assert "chaos.check.bands -> docker" in result.stdout
    assert ".node -> .cluster" in result.stdout
    assert "chaos.report.matrix -> pytest" in result.stdout
    assert "chaos.plugin.terminal -> chaos.backends.docker.sweep" in result.stdout


def test_no_class_is_a_god_class() -> None:
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(ROOT)}:{node.name}: {lines} lines")
    assert big == [], big


@pytest.mark.parametrize("flat", sorted(FLAT - FACES))
def test_shared_utilities_stay_small(flat: str) -> None:
    lines = len((PACKAGE / f"{flat}.py").read_text().splitlines())
    assert lines <= 300, f"chaos/{flat}.py has {lines} lines: a role, not a utility"


#: The longest a module of chaos/ or experiments/ may be, and a function in them.
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: What is longer today, by path (and function): to be split by what each part does. An
#: entry that is no longer needed fails the test too, so the list can only shrink.
LONG_MODULES: set[str] = set()
LONG_FUNCTIONS = {
    "chaos/report/timeline.py:figure",
    "experiments/workloads/churn.py:steady",
    "experiments/workloads/preemption.py:preemption",
    "experiments/workloads/gcs.py:gcs_outage",
    "experiments/workloads/serve_health.py:start_failures",
}


def test_modules_and_functions_stay_short() -> None:
    long_modules: set[str] = set()
    long_functions: set[str] = set()
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "experiments").rglob("*.py")]):
        name = str(path.relative_to(ROOT))
        source = path.read_text()
        if len(source.splitlines()) > MAX_MODULE_LINES:
            long_modules.add(name)
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
            ):
                long_functions.add(f"{name}:{node.name}")
    assert long_modules - LONG_MODULES == set(), f"over {MAX_MODULE_LINES} lines"
    assert long_functions - LONG_FUNCTIONS == set(), f"over {MAX_FUNCTION_LINES} lines"
    assert LONG_MODULES - long_modules == set(), "short now: take them off LONG_MODULES"
    assert LONG_FUNCTIONS - long_functions == set(), "short now: take them off LONG_FUNCTIONS"
