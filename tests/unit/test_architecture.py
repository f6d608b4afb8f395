"""The layout's rules, checked on the source: roles as packages, one engine seam, small classes.

- Only the Docker backend imports docker-py (``chaos/backends/docker``).
- No import cycle between raychaos modules (lazy imports inside functions count too; imports
  for type checking only do not).
- No class over ~300 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "chaos"
ROLES = ("spec", "cluster", "backends", "workload", "nemesis", "observer", "check", "report")
MAX_CLASS_LINES = 300


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "raychaos_agent" in path.parts:  # runs inside the containers, not on the host
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for stmt in node.orelse for n in [stmt, *_runtime_nodes(stmt)])
            continue
        yield node
        yield from _runtime_nodes(node)


def imported(path: Path, *, runtime_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = _runtime_nodes(tree) if runtime_only else ast.walk(tree)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_every_role_is_a_package() -> None:
    assert all((PACKAGE / role / "__init__.py").is_file() for role in ROLES)


def test_only_the_docker_backend_imports_docker_py() -> None:
    offenders = sorted(
        name
        for name, path in modules().items()
        if not name.startswith("chaos.backends.docker")
        and any(
            i == "docker" or i.startswith("docker.") for i in imported(path, runtime_only=False)
        )
    )
    assert offenders == [], f"docker-py imported outside chaos.backends.docker: {offenders}"


def test_no_import_cycles() -> None:
    mods = modules()
    graph = {
        name: {i for i in imported(path, runtime_only=True) if i in mods and i != "chaos"}
        for name, path in mods.items()
    }
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def test_no_class_is_a_god_class() -> None:
    big = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    big.append(f"{name}.{node.name}: {lines} lines")
    assert big == [], big


@pytest.mark.parametrize(
    ("graph", "cyclic"),
    [({"a": {"b"}, "b": {"a"}}, True), ({"a": {"b"}, "b": set()}, False)],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cyclic: bool) -> None:
    assert any(len(c) > 1 for c in _strongly_connected(graph)) is cyclic


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative enough for a few hundred modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found
