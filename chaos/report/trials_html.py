"""The report's sections for repeated trials (``--raychaos-trials N``).

Only when some test ran more than once: per test, good trials out of N with the 95 % Wilson
interval (:mod:`chaos.report.stats`), and every measured window as its median and min–max
over the trials. :mod:`chaos.report.html` passes its status pill in, so the page keeps one
style without this module importing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from chaos.report.markup import escape as _e
from chaos.report.model import Results, TestResult
from chaos.report.stats import TrialGroup, latest_per_trial, repeated, trial_groups

Pill = Callable[[str, str], str]


def every_trial(results: Results) -> list[TestResult]:
    """The latest result of every trial of every test (with one trial: the folded tests)."""
    return latest_per_trial(results.runs) if results.runs else list(results.tests)


def _groups(results: Results) -> list[TrialGroup]:
    return trial_groups(results.runs) if results.runs else []


def held_per_claim(group: TrialGroup) -> str:
    """``CHURN-03 held in 3 of 3; CHURN-05 held in 1 of 3``: each claim of the test by its
    own verdict per trial (:meth:`TrialGroup.held`)."""
    said = []
    for claim in group.latest.claims:
        held = group.held(claim)
        said.append(
            f"{claim} held in {held.successes} of {held.n}" if held.n else f"{claim} not judged"
        )
    return "; ".join(said)


def trials_table(results: Results, pill: Pill) -> str:
    """One row per test and release: its trials' verdict as k/N with the Wilson interval, and
    how often each of its claims held."""
    groups = _groups(results)
    if not repeated(groups):
        return ""
    rows = "".join(
        f"<tr><td>{_e(g.name)}</td><td>{_e(g.latest.ray_version)}</td>"
        f"<td>{_e(', '.join(g.latest.claims))}</td>"
        f"<td>{pill(g.verdict, g.shown)}</td>"
        f"<td>{_e(held_per_claim(g))}</td>"
        f"<td>{_e(' '.join(v for v in g.verdicts))}</td></tr>"
        for g in groups
    )
    return (
        "<h2>Trials</h2><p>Each test ran several times (--raychaos-trials). A trial is good "
        "when it passed (or, for a recorded finding, reproduced it); the interval is the 95 % "
        "Wilson score interval of the good rate. The claims matrix shows the worst trial. A "
        "claim held in k of n: the trials that judged it (passed, failed or raised a finding "
        "about it; a broken, skipped or not-judged trial decided nothing) and those in which "
        "it held — a finding about another claim leaves it held only where the body recorded "
        "it held.</p>"
        "<table><tr><th>experiment</th><th>Ray</th><th>claims</th><th>good trials</th>"
        f"<th>each claim</th><th>verdict per trial</th></tr>{rows}</table>"
    )


def windows_table(results: Results, pill: Pill) -> str:
    """Every measurement per test: median and min–max over its trials ("" with one trial)."""
    groups = _groups(results)
    if not repeated(groups):
        return ""
    rows: list[str] = []
    for group in groups:
        cells = _window_rows(group, results.blobs)
        rows += [
            f"<tr><td>{_e(group.name)}</td><td>{_e(group.latest.ray_version)}</td>"
            f"<td>{pill(group.verdict, group.shown)}</td>{cell}</tr>"
            for cell in cells
        ]
    if not rows:
        return '<p class="muted">No measurements attached.</p>'
    return (
        "<table><tr><th>experiment</th><th>Ray</th><th>trials</th><th>measurement</th>"
        "<th>median</th><th>min–max</th><th>per trial</th></tr>" + "".join(rows) + "</table>"
    )


def _window_rows(group: TrialGroup, blobs: Mapping[str, bytes]) -> Sequence[str]:
    rows = [
        f"<td>{_e(name)}</td><td>{spread.median:g}</td>"
        f"<td>{spread.low:g}–{spread.high:g}</td>"
        f"<td>{_e(', '.join(f'{v:g}' for v in spread.values))}</td>"
        for name, spread in group.spreads(blobs).items()
    ]
    rows += [
        f'<td>{_e(name)}</td><td colspan="2" class="muted">not a number</td>'
        f"<td>{_e(' | '.join(values))}</td>"
        for name, values in group.texts(blobs).items()
    ]
    return rows
