"""Every tolerance constant of the experiments and the checks says where its number comes from.

A module-level UPPER_CASE numeric constant in ``experiments/*.py``, its ``workloads/`` and
``verdicts/``, ``chaos/check/*.py`` or the stall arithmetic whose name reads as a time, a
bound or a tolerance (a ``_S``/``_MS`` suffix, ``SLACK``, ``TOL``, ``MARGIN``, ``BOUND``,
``LIMIT``, ``TIMEOUT``, ``THRESHOLD``, …) must carry a comment — the ``#``/``#:`` lines directly above it (or above the run of
assignments it belongs to, with no blank line between) or an inline one — that cites either

- a measurement: a number with a unit (``1.2 s``, ``300 ms``, ``100 MiB``, ``95 %``) or the
  word "measured"; or
- Ray's source: a ``.cc``/``.h``/``.py`` file name, a docs URL, a knob ``RAY_…`` or
  ``ray_config``.

The check reads words, not meaning: it proves the comment points somewhere checkable, not that
the pointer is right. Constants in files other helpers are still fixing sit in
:data:`PENDING`, by file and name, until their owners document them; an entry that is no longer
needed fails the test too, so the allowlist can only shrink.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOBS = (
    "experiments/*.py",
    "experiments/workloads/*.py",
    "experiments/verdicts/*.py",
    "chaos/check/*.py",
    "chaos/cluster/stall_stretches.py",
)

#: Name parts (split on ``_``) that make a number a time, a bound or a tolerance.
TOLERANCE_WORDS = frozenset(
    {
        "S",
        "MS",
        "SECONDS",
        "MINUTES",
        "SLACK",
        "TOL",
        "TOLERANCE",
        "MARGIN",
        "BOUND",
        "LIMIT",
        "TIMEOUT",
        "DEADLINE",
        "WITHIN",
        "JITTER",
        "FRACTION",
        "THRESHOLD",
        "FACTOR",
        "RATIO",
        "OVERSHOOT",
        "HEADROOM",
    }
)
#: A measurement: a number with a unit, or the word itself.
MEASUREMENT = re.compile(
    r"\bmeasured\b|\d(?:[\d.,]*\d)?\s*(?:s|ms|min|minutes?|seconds?|MiB|GiB|KiB|MB|GB|%)(?![\w])",
    re.IGNORECASE,
)
#: Ray's source: a file of it, a docs page, a knob.
RAY_SOURCE = re.compile(
    r"\b[\w./-]+\.(?:cc|h|py)\b|https?://\S+|docs\.ray\.io|\bRAY_[A-Za-z]\w*|\bray_config",
)

#: Temporary (issue 32): constants not yet documented in files this change does not own. Each
#: entry names the file and the constant; remove it once its comment cites a measurement or
#: Ray's source (the test fails on an entry that is no longer needed).
PENDING: frozenset[tuple[str, str]] = frozenset({})


@dataclass(frozen=True)
class Constant:
    path: str
    line: int
    name: str
    comment: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}"


def is_tolerance_name(name: str) -> bool:
    return name.isupper() and bool(TOLERANCE_WORDS & set(name.split("_")))


def is_numeric(node: ast.expr) -> bool:
    """A number, or arithmetic over numbers and other constants (``10 * ROUND_S + 10``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return is_numeric(node.left) and is_numeric(node.right)
    if isinstance(node, ast.UnaryOp):
        return is_numeric(node.operand)
    return isinstance(node, ast.Name)


def assigned(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """``NAME = value`` or ``NAME: T = value`` at module level, else None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    else:
        return None
    return (target.id, value) if isinstance(target, ast.Name) else None


def comments_by_line(source: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def constants(source: str, path: str = "<source>") -> list[Constant]:
    """The tolerance constants of a module, each with the comment that documents it."""
    tree = ast.parse(source)
    comments = comments_by_line(source)
    lines = source.splitlines()
    # Lines that are a module-level assignment: a comment above a run of them covers the run.
    assignment_lines: set[int] = set()
    for statement in tree.body:
        if assigned(statement) is not None:
            assignment_lines.update(range(statement.lineno, (statement.end_lineno or 0) + 1))
    found = []
    for statement in tree.body:
        pair = assigned(statement)
        if pair is None:
            continue
        name, value = pair
        if not is_tolerance_name(name) or isinstance(value, ast.Name) or not is_numeric(value):
            continue
        end = statement.end_lineno or statement.lineno
        inline = [comments[n] for n in range(statement.lineno, end + 1) if n in comments]
        # The comment lines directly above; with none, the ones above the run of
        # assignments this one ends (no blank line between). A comment block ends the walk.
        above: list[str] = []
        n = statement.lineno - 1
        while n >= 1 and lines[n - 1].strip():
            if n in assignment_lines:  # an earlier assignment of the run (its own comments too)
                if above:
                    break
            elif lines[n - 1].lstrip().startswith("#"):
                above.insert(0, comments.get(n, lines[n - 1].strip()))
            else:
                break
            n -= 1
        found.append(Constant(path, statement.lineno, name, " ".join(above + inline)))
    return found


def cites(comment: str) -> bool:
    return bool(MEASUREMENT.search(comment) or RAY_SOURCE.search(comment))


def suite_constants() -> list[Constant]:
    paths = sorted(p for pattern in GLOBS for p in ROOT.glob(pattern))
    return [
        c for p in paths for c in constants(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))
    ]


def test_every_tolerance_constant_cites_a_measurement_or_ray_source() -> None:
    undocumented = [c for c in suite_constants() if not cites(c.comment)]
    new = [str(c) for c in undocumented if (c.path, c.name) not in PENDING]
    assert new == [], "tolerance constants without a measurement or Ray source:\n" + "\n".join(new)
    stale = PENDING - {(c.path, c.name) for c in undocumented}
    assert not stale, f"documented now, drop from PENDING: {sorted(stale)}"


def test_the_suite_has_tolerance_constants_to_check() -> None:
    # A scan that finds nothing passes on anything: it must see the constants it is about.
    names = {c.name for c in suite_constants()}
    assert {"OBSERVER_SLACK_S", "JOIN_S", "LAUNCH_S", "RETRY_WATCH_S"} <= names, names


UNDOCUMENTED = """
#: How long to wait.
WAIT_S = 20.0
"""


def test_an_undocumented_constant_is_flagged() -> None:
    (found,) = constants(UNDOCUMENTED)
    assert found.name == "WAIT_S" and found.comment == "#: How long to wait."
    assert not cites(found.comment)


@pytest.mark.parametrize(
    "source",
    [
        "#: Raylets exit 21.2-22.2 s after the kill (3 runs).\nEXIT_S = 3.0\n",
        "#: The value measured on CI.\nEXIT_S = 3.0\n",
        "EXIT_S = 3.0  # gcs_rpc_client/rpc_client.h: the reconnect check\n",
        "#: Ray's default (ray_config_def.h).\nPERIOD_MS = 100\n",
        "#: RAY_health_check_period_ms, as set by the preset.\nPERIOD_MS = 1000\n",
        "#: https://docs.ray.io/en/latest/ray-core/fault_tolerance/nodes.html\nBOUND_S = 30\n",
        # One comment above a run of assignments documents the run.
        "#: Seen 6.6-10.6 s on a loaded host.\nGET_S = 5.0\nAFTER_S = 6.0\n",
    ],
)
def test_a_documented_constant_passes(source: str) -> None:
    found = constants(source)
    assert found and all(cites(c.comment) for c in found), found


@pytest.mark.parametrize(
    "source",
    [
        # A blank line ends the comment's reach.
        "#: Seen 6.6-10.6 s on a loaded host.\nGET_S = 5.0\n\nAFTER_S = 6.0\n",
        # A number without a unit is not a measurement; "Ray" alone is not a source.
        "#: Ray's default is 5; its own tests use 1.\nROUND_S = 1.0\n",
        # A comment inside an earlier assignment of the run is that assignment's.
        "X = {\n    # ray_config_def.h\n    'a': 1,\n}\nWAIT_S = 2\n",
        # A constant's own comment ends the walk: the run's comment above does not reach it.
        "#: From ray_config_def.h.\nDEFAULTS_S = 1\n#: How long to wait.\nWAIT_S = 2\n",
        # A comment above a function does not document the constant after it.
        "#: From raylet.cc.\ndef f() -> None: ...\nLIMIT_S = 5\n",
    ],
)
def test_what_does_not_count_as_a_citation(source: str) -> None:
    flagged = [c.name for c in constants(source) if not cites(c.comment)]
    assert flagged, source


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("MIB = 2**20\n", []),  # a unit, not a tolerance
        ("PORT = 8000\n", []),
        ("CAUSE_S = RECONNECT\n", []),  # an alias, documented where it is defined
        ("NAME_S = 'x'\n", []),  # not a number
        ("IDLE_S = IDLE_MINUTES * 60\n", ["IDLE_S"]),
        ("SLACK: float = -0.5\n", ["SLACK"]),
    ],
)
def test_which_constants_are_tolerances(source: str, expected: list[str]) -> None:
    assert [c.name for c in constants(source)] == expected
