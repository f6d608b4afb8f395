"""Allure results → one self-contained HTML page, readable without Java or Node.

``raychaos report RESULTS_DIR -o reports/summary.html`` renders the claims matrix (every claim
of the catalogue, ``fixtures/claims.toml``, × Ray version), the findings, the failures with
their messages, the measured recovery windows and the timelines (PNG inlined as base64), so
the page can be mailed or kept as a CI artifact on its own. It classifies failures with the
categories Allure reads (:mod:`chaos.report.categories`), so the page and Allure agree.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from chaos.report.catalogue import Catalogue, load_catalogue
from chaos.report.categories import FINDING_GONE
from chaos.report.claims import families
from chaos.report.compare import (
    CHANGES,
    COLOURS,
    WINDOW_MOVED,
    Comparison,
    compare,
    sides_of,
)
from chaos.report.compare import FINDING_GONE as NO_LONGER_REPRODUCES
from chaos.report.compare_table import legend, lines, not_run
from chaos.report.coverage import MISSING, NOT_JUDGED, XPASS, verdict_for
from chaos.report.coverage import Cell as ClaimCell
from chaos.report.markup import escape as _e
from chaos.report.matrix import (
    NOT_RUN,
    STATUS_ORDER,
    Cell,
    claim_matrix,
    measurements_of,
    versions_of,
)
from chaos.report.model import (
    FINDING,
    GONE,
    INCONCLUSIVE,
    XPASS_STRICT,
    Results,
    TestResult,
    load_results,
)
from chaos.report.trials_html import every_trial, trials_table, windows_table

#: ``raychaos report``'s exit codes, as its help states them.
EXIT_OK, EXIT_FAILED = 0, 1
REPORT_HELP = """\
Render an Allure results directory as one self-contained HTML page: the claims x Ray version
matrix, findings, failures with their Allure category, measured windows and timelines. Exit 0
when no result is failed or broken (passed, skipped and recorded findings are fine); 1 when any
result is failed or broken, or a recorded finding no longer reproduces (its test passed: it
is listed as "Finding no longer reproduces", never as a failure, and its xfail marker needs
updating); 2 on a usage error (RESULTS is not a directory or holds no raychaos results)."""

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;
color:#1d1d1f;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d6d6d6;padding:3px 8px;
text-align:left;vertical-align:top}th{white-space:nowrap}th{background:#f3f3f3}.muted{color:#777}
td.s{text-align:center;font-weight:600;white-space:nowrap}
.passed{background:#d7f0dc;color:#17612b}.failed{background:#f9d3d3;color:#8c1212}
.broken{background:#fde6c4;color:#8a4b00}.finding{background:#e5dcf7;color:#4b2a8c}
.skipped{background:#eceff1;color:#455a64}.unknown{background:#eceff1}
.inconclusive{background:#fff6d6;color:#6d5a00}
.gone{background:#d4ecf7;color:#0b4f6c}
.notrun{background:#fff;color:#9e9e9e;font-weight:400}
tr.fam th{background:#e8eef6}pre{white-space:pre-wrap;background:#f7f7f7;padding:8px;margin:4px 0;
max-height:320px;overflow:auto;font-size:12px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;margin-right:6px;font-weight:600}
img{max-width:100%;border:1px solid #eee}
"""


def _css(status: str) -> str:
    """The CSS class of an effective status (one word)."""
    return {NOT_RUN: "notrun", NOT_JUDGED: "notrun", GONE: "gone"}.get(status, status)


def _status(status: str, text: str | None = None) -> str:
    return f'<span class="pill {_e(_css(status))}">{_e(text or status)}</span>'


def exit_code(results: Results) -> int:
    """1 when any result is failed or broken (a finding that no longer reproduces included:
    its marker needs an update), else 0. See :data:`REPORT_HELP`."""
    bad = ("failed", "broken", GONE)
    return EXIT_FAILED if any(t.effective_status in bad for t in results.tests) else EXIT_OK


def _summary(
    results: Results, cells: Mapping[tuple[str, str], Cell], claim_ids: Sequence[str]
) -> str:
    counts: dict[str, int] = {}
    for test in results.tests:
        counts[test.effective_status] = counts.get(test.effective_status, 0) + 1
    per_claim = {c: [cell.status for (cc, _), cell in cells.items() if cc == c] for c in claim_ids}
    verified = sum(
        1 for s in per_claim.values() if s and all(x in ("passed", "finding") for x in s)
    )
    pills = " ".join(_status(s, f"{s} {counts[s]}") for s in STATUS_ORDER if s in counts)
    return (
        f"<p>{len(results.tests)} results: {pills or 'none'}</p>"
        f"<p>Claims verified (passed, or a documented FINDING, in every Ray version column): "
        f"<b>{verified}/{len(claim_ids)}</b></p>"
    )


def _environment(results: Results) -> str:
    if not results.environment:
        return '<p class="muted">No environment.properties in the results directory.</p>'
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in sorted(results.environment.items())
    )
    return f"<details><summary>Environment</summary><table>{rows}</table></details>"


def _matrix(
    claims: Sequence[tuple[str, str]],
    versions: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
) -> str:
    known = {c for c, _ in claims}
    extra = sorted({c for c, _ in cells} - known)
    head = "".join(f"<th>Ray {_e(v)}</th>" for v in versions)
    rows: list[str] = []
    family = ""
    for claim, fault in [*claims, *((c, "not in the claim catalogue") for c in extra)]:
        prefix = claim.split("-", 1)[0]
        if prefix != family:
            family = prefix
            named = families()
            feature = named[prefix].feature if prefix in named else prefix
            rows.append(
                f'<tr class="fam"><th colspan="{len(versions) + 2}">{_e(feature)}</th></tr>'
            )
        tds = []
        for version in versions:
            cell = cells.get((claim, version), Cell(NOT_RUN))
            tip = (
                "; ".join(
                    [
                        *(f"{n}: {s}" for n, s in cell.tests),
                        *(f"{n}: {NOT_JUDGED}" for n in cell.unjudged),
                    ]
                )
                or "no experiment carries this claim"
            )
            css = _css(cell.status)
            shown = cell.status
            if len(cell.tests) > 1:
                shown += f" ({sum(1 for _, s in cell.tests if s == cell.status)}/{len(cell.tests)})"
            tds.append(f'<td class="s {_e(css)}" title="{_e(tip)}">{_e(shown)}</td>')
        rows.append(f"<tr><th>{_e(claim)}</th><td>{_e(fault)}</td>{''.join(tds)}</tr>")
    return f"<table><tr><th>claim</th><th>fault</th>{head}</tr>{''.join(rows)}</table>"


def _title(test: TestResult) -> str:
    claims = ", ".join(test.claims) or "no claim"
    version = f" · Ray {_e(test.ray_version)}" if test.ray_version else ""
    where = f"{_e(test.full_name)} · {_e(claims)}{version}"
    return f"<b>{_e(test.name)}</b> <span class='muted'>{where}</span>"


def _findings(tests: Sequence[TestResult]) -> str:
    found = [o for o in tests if o.effective_status == "finding"]
    if not found:
        return '<p class="muted">None.</p>'
    return "".join(
        f'<div class="card">{_status("finding")}{_title(o)}{_about(o)}'
        f"<pre>{_e(FINDING.sub('FINDING:', o.message.split(chr(10) * 2)[0], count=1))}</pre></div>"
        for o in found
    )


def _about(test: TestResult) -> str:
    """Which of a finding's claims it is about, and each other claim's own verdict
    (:func:`chaos.report.coverage.verdict_for`: passed where the body recorded it held)."""
    if set(test.claims) <= set(test.finding_claims):
        return ""
    others = ", ".join(
        f"{c} {verdict_for(c, test)}" for c in test.claims if c not in test.finding_claims
    )
    return (
        f"<div>about <b>{_e(', '.join(test.finding_claims))}</b>; "
        f"the test's other claims: {_e(others)}</div>"
    )


def _message(test: TestResult) -> str:
    if test.message:
        return test.message
    if test.strict_xpass:
        return f"{XPASS_STRICT} the recorded FINDING no longer reproduces: the test passed"
    return "(no message)"


def _gone(tests: Sequence[TestResult]) -> str:
    gone = [o for o in tests if o.effective_status == GONE]
    if not gone:
        return '<p class="muted">None.</p>'
    return "".join(
        f'<div class="card">{_status(GONE)}{_title(o)}'
        f"<div>category: <b>{_e(o.category or FINDING_GONE)}</b> — Ray now behaves as "
        "documented here (or the experiment no longer sees the difference): check the "
        "evidence, then remove the xfail marker.</div>"
        f"<pre>{_e(_message(o))}</pre></div>"
        for o in gone
    )


def _failures(tests: Sequence[TestResult]) -> str:
    bad = [o for o in tests if o.status in ("failed", "broken") and o.effective_status != GONE]
    if not bad:
        return '<p class="muted">None.</p>'
    cards = []
    for o in sorted(bad, key=lambda o: (o.category or "~", o.full_name)):
        trace = (
            f"<details><summary>trace</summary><pre>{_e(o.trace)}</pre></details>"
            if o.trace
            else ""
        )
        cards.append(
            f'<div class="card">{_status(o.status)}{_title(o)}'
            f"<div>category: <b>{_e(o.category or 'uncategorised')}</b></div>"
            f"<pre>{_e(_message(o))}</pre>{trace}</div>"
        )
    return "".join(cards)


def _measurements(tests: Sequence[TestResult], blobs: Mapping[str, bytes]) -> str:
    rows = [
        f"<tr><td>{_e(o.name)}</td><td>{_e(o.ray_version)}</td><td>{_status(o.effective_status)}</td>"
        f"<td>{_e(name)}</td><td>{_e(value)}</td></tr>"
        for o in tests
        for name, value in measurements_of(o, blobs)
    ]
    if not rows:
        return '<p class="muted">No measurements attached.</p>'
    return (
        "<table><tr><th>experiment</th><th>Ray</th><th>outcome</th><th>measurement</th>"
        f"<th>value</th></tr>{''.join(rows)}</table>"
    )


def _timelines(tests: Sequence[TestResult], blobs: Mapping[str, bytes]) -> str:
    figures = []
    for o in tests:
        for a in o.attachments:
            if a.type == "image/png" and a.source in blobs:
                data = base64.b64encode(blobs[a.source]).decode("ascii")
                figures.append(
                    f'<figure class="card"><figcaption>{_status(o.effective_status)}'
                    f"{_title(o)} · {_e(a.name)}</figcaption>"
                    f'<img alt="{_e(a.name)} of {_e(o.name)}" src="data:image/png;base64,{data}">'
                    "</figure>"
                )
    return "".join(figures) or '<p class="muted">No timelines attached.</p>'


def _comparisons(results: Results, claim_ids: Sequence[str]) -> str:
    """With several Ray releases: each against the next, as ``raychaos compare`` shows it."""
    return "".join(
        f"<h2>Ray {_e(base.release)} → Ray {_e(candidate.release)}</h2>"
        + compare_section(compare(base, candidate, claim_ids))
        for base, candidate in sides_of(results)
    )


def _verdict(cell: ClaimCell) -> str:
    css = "not run" if cell.verdict == MISSING else cell.verdict
    return _status({XPASS: "passed"}.get(css, css), cell.shown)


def compare_section(cmp: Comparison) -> str:
    """A comparison's table (:func:`chaos.report.compare_table.lines`: the rows and order of its
    Markdown), its counts, the windows' legend and the count of claims run on neither side."""
    b, c = cmp.base, cmp.candidate
    rows = []
    for line in lines(cmp):
        if line.row is not None:
            r = line.row
            rows.append(
                f"<tr><th>{_e(r.claim)}</th><td>{_verdict(r.base)}</td>"
                f"<td>{_verdict(r.candidate)}</td><td>{_status(COLOURS[r.change], r.change)}</td>"
                f"<td>{_e(r.detail)}</td></tr>"
            )
        else:
            moved = _status(COLOURS[WINDOW_MOVED], line.change) if line.change else ""
            rows.append(
                f'<tr class="muted"><td>{_e(line.claim)}</td><td>{_e(line.base)}</td>'
                f"<td>{_e(line.candidate)}</td><td>{moved}</td><td>{_e(line.detail)}</td></tr>"
            )
    pills = " ".join(
        _status(COLOURS[ch], f"{ch} {cmp.count(ch)}") for ch in CHANGES if cmp.count(ch)
    )
    table = (
        "<table><tr><th>claim</th>"
        f"<th>Ray {_e(b.release)}</th><th>Ray {_e(c.release)}</th>"
        f"<th>change</th><th>detail</th></tr>{''.join(rows)}</table>"
        if rows
        else ""
    )
    key = f'<p class="muted">{_e(legend())}</p>' if any(r.windows for r in cmp.rows) else ""
    skipped = not_run(cmp)
    tail = (
        f"<p><details><summary>Not run on either side: {len(skipped)} claims</summary>"
        f"{_e(', '.join(skipped))}</details></p>"
        if skipped
        else ""
    )
    if cmp.unknown:
        tail += f"<p>Not in the claim catalogue: {_e(', '.join(cmp.unknown))}</p>"
    return (
        f"<p>{len(cmp.rows)} claims: {pills}</p>"
        f"<p><b>{'REGRESSION' if cmp.exit_code else 'No regression'}</b>: a regression is a "
        "claim that passed on the base and failed or broke on the candidate. A recorded "
        "finding whose test now passes (pytest's [XPASS(strict)]) is listed as "
        f"“{NO_LONGER_REPRODUCES}”.</p>{table}{key}{tail}"
    )


def render_compare(cmp: Comparison, *, generated: datetime | None = None) -> str:
    """``raychaos compare``'s page: the comparison, self-contained, in the report's style."""
    b, c = cmp.base, cmp.candidate
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    return page(
        f"raychaos compare — Ray {b.release} → Ray {c.release}",
        f"generated {when}",
        f"<p>base: {_e(b.label)}<br>candidate: {_e(c.label)}</p>{compare_section(cmp)}",
    )


def render_html(
    results: Results, claims: Sequence[tuple[str, str]], *, generated: datetime | None = None
) -> str:
    """The whole page as one string: inline CSS, inline images, no scripts."""
    claim_ids = [c for c, _ in claims]
    versions = versions_of(results.tests)
    # Every trial counts (--raychaos-trials): a cell shows the worst and how many reached it.
    cells = claim_matrix(every_trial(results), claim_ids, versions)
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    name = results.executor.get("buildName") or "raychaos run " + results.environment.get(
        "raychaos.run", "?"
    )
    problems = (
        "<h2>Unreadable files</h2><ul>"
        + "".join(f"<li>{_e(p)}</li>" for p in results.problems)
        + "</ul>"
        if results.problems
        else ""
    )
    legend = " ".join(
        _status(s, text)
        for s, text in (
            ("passed", "passed"),
            (
                "finding",
                "finding: Ray contradicts its docs, recorded as an xfail (strict, or non-strict "
                "for a race or crash inside Ray that goes either way)",
            ),
            (GONE, "finding gone: a recorded finding's test passed (update its marker)"),
            ("failed", "failed: Ray contradicts its docs (new)"),
            ("broken", "broken: harness, Docker or inconclusive"),
            ("skipped", "skipped"),
            (INCONCLUSIVE, "inconclusive: the host was too busy to judge"),
            (NOT_JUDGED, "not judged: carried by a test that did not decide it"),
            (NOT_RUN, NOT_RUN),
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>raychaos — Ray fault tolerance report</title><style>{_CSS}</style></head>
<body>
<h1>raychaos — Ray fault tolerance report</h1>
<p class="muted">{_e(name)} · generated {_e(when)} from {_e(results.directory)}</p>
{_summary(results, cells, claim_ids)}
{_environment(results)}
<h2>Claims × Ray version</h2>
<p>{legend}</p>
{_matrix(claims, versions, cells)}
{_comparisons(results, claim_ids)}
<h2>Findings</h2>
{_findings(results.tests)}
<h2>Findings no longer reproduced</h2>
{_gone(results.tests)}
<h2>Failures and broken experiments</h2>
{_failures(every_trial(results))}
{trials_table(results, _status)}
<h2>Measured recovery windows</h2>
{windows_table(results, _status) or _measurements(results.tests, results.blobs)}
<h2>Timelines</h2>
{_timelines(results.tests, results.blobs)}
{problems}
</body></html>
"""


def page(title: str, subtitle: str, body: str) -> str:
    """A whole self-contained page in this report's style (other reports reuse it)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="muted">{_e(subtitle)}</p>
{body}
</body></html>
"""


#: Public names of the page's helpers: escape text, a coloured status pill.
escape = _e
pill = _status


def write_report(
    results_dir: Path,
    output: Path,
    catalogue: Catalogue | None = None,
    loaded: Results | None = None,
) -> Results:
    """Load ``results_dir`` (unless ``loaded`` is it already), render the page to ``output``;
    returns what was loaded."""
    results = loaded if loaded is not None else load_results(results_dir)
    claims = [(c.id, c.fault) for c in (catalogue or load_catalogue())]
    text = render_html(results, claims)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return results
