"""A comparison as a table: the lines Markdown and HTML both render (claims, their windows
under them), and the Markdown renderer (a terminal, a pull-request comment). The comparison
itself — sides, classification, windows — is :mod:`chaos.report.compare`; HTML is
:mod:`chaos.report.html`.
"""

from __future__ import annotations

from dataclasses import dataclass

from chaos.report.compare import (
    NOT_RUN,
    REGRESSION,
    WINDOW_MOVED,
    Comparison,
    Row,
    Window,
    ordered,
    summary,
)
from chaos.report.stats import BEYOND_NOISE, BEYOND_TOLERANCE, MOVE_FLOOR, MOVE_RATIO

#: The mark of a window's line, under its claim's.
WINDOW_MARK = "↳ "


def legend() -> str:
    """How windows are shown and when one moved (the tolerance stated)."""
    return (
        f"Windows ({WINDOW_MARK.strip()} rows): median (min–max, N trials) on each side. "
        f"{WINDOW_MOVED.capitalize()}: with 2 trials or more on both sides when the ranges do "
        f"not overlap ({BEYOND_NOISE}); else, for a window in seconds, when the medians "
        f"differ by ×{MOVE_RATIO:g} or more and by {MOVE_FLOOR:g} s or more ({BEYOND_TOLERANCE}: "
        "one release's windows vary up to ×6 between suite runs; counts and bytes are shown, "
        "not judged, with single trials). Postconditions (INV-01, "
        "INV-02) are judged only by the tests that checked them."
    )


@dataclass(frozen=True)
class Line:
    """One line of the comparison table: a claim, or one of its windows under it."""

    claim: str
    base: str
    candidate: str
    change: str
    detail: str
    #: The claim's row (None for a window's line).
    row: Row | None = None
    window: Window | None = None


def lines(cmp: Comparison) -> list[Line]:
    """The table Markdown and HTML both render: every shown claim, its windows below it."""
    found = []
    for row in ordered(cmp):
        found.append(
            Line(row.claim, row.base.shown, row.candidate.shown, row.change, row.detail, row)
        )
        for w in row.windows:
            why = f"{w.delta}, {w.moved}" if w.moved else w.delta
            found.append(
                Line(
                    WINDOW_MARK + w.label,
                    str(w.base) if w.base else "—",
                    str(w.candidate) if w.candidate else "—",
                    WINDOW_MOVED if w.moved else "",
                    why,
                    window=w,
                )
            )
    return found


def not_run(cmp: Comparison) -> list[str]:
    return [r.claim for r in cmp.rows if r.change == NOT_RUN]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(cmp: Comparison) -> str:
    """The comparison as Markdown (a terminal, a pull-request comment): changes first, then
    unchanged claims, each with its windows side by side, then a count of claims not run."""
    b, c = cmp.base, cmp.candidate
    out = [
        f"# raychaos compare: Ray {b.release} → Ray {c.release}",
        "",
        f"- base: {_md(b.label)}",
        f"- candidate: {_md(c.label)}",
        f"- {len(cmp.rows)} claims: {summary(cmp)}",
        "",
    ]
    table = lines(cmp)
    if table:
        out += [
            f"| claim | Ray {_md(b.release)} | Ray {_md(c.release)} | change | detail |",
            "|---|---|---|---|---|",
        ]
        for line in table:
            change = (
                f"**{line.change}**" if line.change in (REGRESSION, WINDOW_MOVED) else line.change
            )
            out.append(
                f"| {_md(line.claim)} | {_md(line.base)} | {_md(line.candidate)} | {change} "
                f"| {_md(line.detail)} |"
            )
        out.append("")
        if any(line.window for line in table):
            out.append(legend())
    skipped = not_run(cmp)
    if skipped:
        out.append(f"Not run on either side: {len(skipped)} claims")
    if cmp.unknown:
        out.append(f"Not in the claim catalogue: {', '.join(cmp.unknown)}")
    out.append(
        "Result: "
        + (f"{cmp.count(REGRESSION)} regression(s)" if cmp.exit_code else "no regression")
    )
    return "\n".join(out) + "\n"
