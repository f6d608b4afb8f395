"""The image contract: what a probe report must hold, what a missing tool disables, how a
refused image reads, and that the experiments declare every fault tool they exec."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chaos.backends.base import ExecResult
from chaos.backends.docker.images.derived import _explained
from chaos.errors import ImageBuildError, ImageLacksTool
from chaos.nemesis.base import run
from chaos.spec.image_contract import (
    FAULT_TOOLS,
    REQUIRED_TOOLS,
    ImageProbe,
    module_skip_reason,
    needed_modules,
    needed_tools,
    skip_reason,
)

ROOT = Path(__file__).resolve().parents[2]
REPORT = {
    "ray": "/srv/team/env/bin/ray",
    "python": "/srv/team/env/bin/python3",
    "ray_version": "2.60.0",
    "python_version": "3.12.1",
    "prefix_kind": "venv",
    "tools": {**{t: f"/usr/bin/{t}" for t in REQUIRED_TOOLS}, "ps": "/usr/bin/ps", "tc": ""},
}


def test_a_probe_report_reads_into_a_frozen_probe() -> None:
    probe = ImageProbe.from_json("team/ray:1", "raychaos/node:abc", REPORT)
    assert probe.ray_version == "2.60.0" and probe.prefix_kind == "venv"
    assert probe.has("ps") and not probe.has("tc") and not probe.has("iptables")
    assert probe.missing_required == []
    assert probe.missing_fault_tools == ["kill", "iptables", "ss", "tc", "fallocate"]
    assert probe.describe() == (
        "team/ray:1: Ray 2.60.0 on Python 3.12.1 (venv /srv/team/env/bin/python3), "
        "node image raychaos/node:abc"
    )
    with pytest.raises(TypeError):
        probe.tools["tc"] = "/x"  # type: ignore[index]


def test_an_unreadable_report_is_one_image_error() -> None:
    with pytest.raises(ImageBuildError, match="the probe of team/ray:1 wrote an unreadable report"):
        ImageProbe.from_json("team/ray:1", "raychaos/node:abc", {"ray": "/x"})


def test_a_missing_required_tool_refuses_the_image_naming_each() -> None:
    report: dict[str, Any] = {**REPORT, "tools": {"sh": "/bin/sh", "cat": "/bin/cat"}}
    probe = ImageProbe.from_json("slim/ray:1", "raychaos/node:abc", report)
    with pytest.raises(ImageBuildError) as refused:
        probe.require_bootable()
    message = str(refused.value)
    assert message.startswith("slim/ray:1 lacks timeout, stat, df, which every raychaos node")
    assert "docs/images.md" in message and "\n" not in message


def test_skip_reason_names_the_missing_tools_and_what_they_are_for() -> None:
    probe = ImageProbe.from_json("team/ray:1", "raychaos/node:abc", REPORT)
    assert skip_reason(probe, ("ps",)) is None
    reason = skip_reason(probe, ("iptables", "ss"))
    assert reason is not None
    assert reason.startswith("image team/ray:1 has no iptables, ss, which this experiment needs")
    assert FAULT_TOOLS["iptables"] in reason


def test_a_module_that_does_not_import_skips_what_needs_it_with_the_error() -> None:
    error = "ModuleNotFoundError: No module named 'starlette'"
    probe = ImageProbe.from_json(
        "team/ray:1", "raychaos/node:abc", {**REPORT, "modules": {"ray.serve": error}}
    )
    assert probe.missing_modules == ["ray.serve"]
    reason = module_skip_reason(probe, ("ray.serve",))
    assert reason is not None
    assert reason.startswith(f"image team/ray:1 cannot import ray.serve: ray.serve: {error}")
    assert "ray[serve]" in reason and "\n" not in reason
    # An older probe tried no module: taken as importable, nothing skipped.
    older = ImageProbe.from_json("team/ray:1", "raychaos/node:abc", REPORT)
    assert older.missing_modules == [] and module_skip_reason(older, ("ray.serve",)) is None
    assert needed_modules(("ray.serve",)) == ("ray.serve",)
    with pytest.raises(ValueError, match="got numpy"):
        needed_modules(("numpy",))


def test_a_marker_names_only_tools_of_the_contract() -> None:
    assert needed_tools(("ps", "kill")) == ("ps", "kill")
    with pytest.raises(ValueError, match="got nmap"):
        needed_tools(("ps", "nmap"))


def test_a_refused_image_reads_as_the_probes_own_words() -> None:
    failed = ImageBuildError(
        "docker build of raychaos/node:abc failed: The command '/bin/sh -c …' returned a "
        "non-zero code: 3",
        hint="last build lines: Step 6/8 : RUN … | raychaos-probe: no 'ray' executable on PATH "
        "(/usr/bin:/bin) nor in /opt/*/bin, /srv/*/bin, ~/.local/bin",
    )
    explained = _explained("team/no-ray:1", failed)
    assert explained.message == (
        "team/no-ray:1 cannot be a raychaos node: no 'ray' executable on PATH (/usr/bin:/bin) "
        "nor in /opt/*/bin, /srv/*/bin, ~/.local/bin"
    )
    no_shell = ImageBuildError(
        "docker build of raychaos/node:abc failed: failed to create shim task: exec: "
        '"/bin/sh": stat /bin/sh: no such file or directory'
    )
    assert _explained("distroless/ray:1", no_shell).message == (
        "distroless/ray:1 cannot be a raychaos node: it has no /bin/sh"
    )


class _Cluster:
    def __init__(self, result: ExecResult) -> None:
        self.result = result

    def exec(self, node: str, argv: list[str], *, timeout: float) -> ExecResult:
        return self.result


def test_a_command_missing_from_the_image_says_which_marker_is_missing() -> None:
    missing = ExecResult(127, "timeout: failed to run command 'iptables': No such file")
    with pytest.raises(ImageLacksTool) as lacked:
        run(_Cluster(missing), "worker-1", ["iptables", "-S"])  # type: ignore[arg-type]
    assert "@pytest.mark.needs_tools('iptables')" in str(lacked.value)


# -- the experiments declare what they exec -------------------------------------------------
#: Nemesis calls → the fault tools they exec inside a node.
CALLS = {
    "pids": {"ps"},
    "kill_raylet": {"ps", "kill"},
    "kill_gcs": {"ps", "kill"},
    "kill_worker": {"ps", "kill"},
    "stop_node": {"ps"},
    "partition": {"iptables", "ss"},
    "degrade": {"tc", "iptables"},
    "fill_disk": {"fallocate"},
}


def _on_nemesis(node: ast.Attribute) -> bool:
    """``….nemesis.x`` or ``Nemesis.x`` (not ``str.partition``)."""
    owner = node.value
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return name in {"nemesis", "Nemesis"}


def _uses(module: ast.Module, fn: ast.FunctionDef) -> set[str]:
    """Fault tools a test function execs: nemesis calls, commands it runs, helpers it calls."""
    helpers = {n.name: n for n in module.body if isinstance(n, ast.FunctionDef)}
    seen, todo, tools = {fn.name}, [fn], set()
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Attribute) and node.attr in CALLS and _on_nemesis(node):
                tools |= CALLS[node.attr]
            called = (
                node.func.id
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                else ""
            )
            if called in helpers and called not in seen:
                seen.add(called)
                todo.append(helpers[called])
            if isinstance(node, ast.List) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value in FAULT_TOOLS:
                    tools.add(str(first.value))
                if isinstance(first, ast.Constant) and first.value == "sh":
                    script = " ".join(
                        str(e.value) for e in node.elts if isinstance(e, ast.Constant)
                    )
                    tools |= {t for t in FAULT_TOOLS if f"{t} " in script}
    return tools


def _declared(module: ast.Module, fn: ast.FunctionDef) -> set[str]:
    def named(deco: ast.expr) -> set[str]:
        found = set()
        for node in ast.walk(deco):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "needs_tools":
                found |= {str(a.value) for a in node.args if isinstance(a, ast.Constant)}
        return found

    tools = set().union(*(named(d) for d in fn.decorator_list))
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            tools |= named(node.value)
    return tools


@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments").glob("test_*.py")), ids=lambda p: p.name
)
def test_every_experiment_declares_the_fault_tools_it_execs(path: Path) -> None:
    module = ast.parse(path.read_text())
    for fn in module.body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
            undeclared = _uses(module, fn) - _declared(module, fn)
            assert not undeclared, f"{fn.name} execs {undeclared}: add @pytest.mark.needs_tools"


# -- the agent runs on the image's own Python ------------------------------------------------
AGENT = ROOT / "chaos" / "agent"
#: The oldest Python a supported Ray release runs on (Ray 2.50: 3.9).
OLDEST = (3, 9)


def test_the_agent_and_workloads_parse_as_the_oldest_python_ray_supports() -> None:
    for path in [*AGENT.rglob("*.py"), *(ROOT / "experiments" / "workloads").rglob("*.py")]:
        ast.parse(path.read_text(), str(path), feature_version=OLDEST)


PYENV = [
    p
    for p in sorted(Path("/root/.pyenv/versions").glob("3.*/bin/python3"))
    if tuple(int(x) for x in p.parent.parent.name.split(".")[:2]) >= OLDEST
]


@pytest.mark.skipif(not PYENV, reason="no pyenv interpreters on this machine")
@pytest.mark.parametrize("python", PYENV, ids=lambda p: p.parent.parent.name)
def test_the_agent_imports_on_other_pythons(python: Path) -> None:
    """Every agent module imports on that interpreter (``ray`` itself aside: it is not there)."""
    probe = (
        "import importlib, pkgutil, raychaos_agent\n"
        "for m in pkgutil.iter_modules(raychaos_agent.__path__):\n"
        "    try:\n"
        "        importlib.import_module('raychaos_agent.' + m.name)\n"
        "    except ModuleNotFoundError as e:\n"
        "        if (e.name or '').split('.')[0] != 'ray':\n"
        "            raise\n"
    )
    done = subprocess.run(
        [str(python), "-c", probe], cwd=AGENT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
