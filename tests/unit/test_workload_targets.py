"""Every ``cluster.run("workloads.MODULE:FUNCTION", **kwargs)`` in ``experiments/`` names a
function that exists and takes those keyword arguments.

A target is otherwise checked only inside a booted container, minutes into a run: a renamed
workload or a misspelt argument would cost a boot to find. Read from the source (the
workloads import Ray, which the host does not have).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
TARGET = re.compile(r"^workloads\.(\w+):(\w+)$")
#: ``Cluster.run``'s own keyword arguments: not passed to the workload.
RUN_OWN = frozenset({"node", "timeout", "env", "python"})


@dataclass(frozen=True)
class Call:
    where: str
    module: str
    function: str
    #: The keyword arguments passed to the workload; None when a ``**mapping`` hides them.
    keywords: frozenset[str] | None


def calls() -> list[Call]:
    found = []
    for path in sorted(EXPERIMENTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            if not (match := TARGET.match(first.value)):
                continue
            named = {k.arg for k in node.keywords}
            keywords = None if None in named else frozenset(str(k) for k in named) - RUN_OWN
            where = f"{path.name}:{node.lineno}"
            found.append(Call(where, match[1], match[2], keywords))
    return found


def signature(module: str, function: str) -> ast.FunctionDef | None:
    path = EXPERIMENTS / "workloads" / f"{module}.py"
    if not path.exists():
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return node
    return None


CALLS = calls()


def test_the_experiments_name_workloads() -> None:
    # The scan itself must see the targets, or the test below checks nothing.
    assert len(CALLS) >= 60, len(CALLS)
    assert len({(c.module, c.function) for c in CALLS}) >= 40


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.where)
def test_a_workload_target_exists_and_takes_its_arguments(call: Call) -> None:
    target = f"workloads.{call.module}:{call.function}"
    fn = signature(call.module, call.function)
    assert fn is not None, f"{call.where}: {target} is not a module-level function"
    args = fn.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    if call.keywords is None:
        return  # a **mapping: its keys are known only at run time
    if args.kwarg is None:
        unknown = sorted(call.keywords - set(params))
        assert not unknown, f"{call.where}: {target} takes no {unknown} (it takes {params})"
    # Parameters without a default must be given (positional ones are never passed).
    positional = [*args.posonlyargs, *args.args]
    required = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    missing = sorted(set(required) - call.keywords)
    assert not missing, f"{call.where}: {target} needs {missing}"
