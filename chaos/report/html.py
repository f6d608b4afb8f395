"""Allure results → one self-contained HTML page, readable without Java or Node.

``raychaos report RESULTS_DIR -o reports/summary.html`` renders the claims matrix (every claim
id of CLAIMS.md × Ray version), the findings, the failures with their messages, the measured
recovery windows and the timelines (PNG inlined as base64), so the page can be mailed or kept
as a CI artifact on its own. The same module holds the Allure categories that
:mod:`chaos.reporting` writes as ``categories.json``, so the page and Allure classify alike.

Loading (:func:`load_results`) is the only I/O; the rest are pure functions of the loaded data.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError, FaultNotObserved
from chaos.report.claims import FAMILIES

#: allure-pytest records an xfail as "skipped" with the message "XFAIL <reason>…".
FINDING = re.compile(r"^(?:XFAIL )?FINDING:")
#: A cell shows the worst outcome among its tests; worst first.
STATUS_ORDER = ("failed", "broken", "finding", "skipped", "unknown", "passed")
NOT_RUN = "not run"
MEASUREMENTS = "measurements"
PARAMETER = "ray_version"


# -- categories (shared with categories.json) ----------------------------------------------
@dataclass(frozen=True)
class Category:
    """An Allure category: Allure matches the whole message (Java ``matches``), first wins."""

    name: str
    description: str
    statuses: tuple[str, ...]
    message_regex: str

    def matches(self, status: str, message: str) -> bool:
        return status in self.statuses and re.fullmatch(self.message_regex, message) is not None

    def to_allure(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "matchedStatuses": list(self.statuses),
            "messageRegex": self.message_regex,
        }


def _subclasses(root: type[BaseException]) -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for sub in root.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def _harness_names() -> list[str]:
    # Derived from the hierarchy so a new ChaosError subclass is categorised without an edit.
    inconclusive = {FaultNotObserved, *_subclasses(FaultNotObserved)}
    return sorted(
        {ChaosError.__name__}
        | {c.__name__ for c in _subclasses(ChaosError) if c not in inconclusive}
    )


#: Order matters (first match wins): specific causes before the generic AssertionError.
#: Harness errors are matched as "failed" too: the plugin's fixtures turn a ChaosError into
#: ``pytest.fail("ClusterBootTimeout: …")``, which Allure records as failed.
CATEGORIES: tuple[Category, ...] = (
    Category(
        "Worker crashed (xdist)",
        "The pytest-xdist worker died mid-test (SIGKILL, OOM killer, os._exit, segfault); "
        "the result was written by the controller. Rerun the test alone and check dmesg.",
        ("broken",),
        r"(?s).*worker '?gw\d+'? crashed.*",
    ),
    Category(
        "Fault not observed / inconclusive",
        "The fault was injected but its effect could not be verified: nothing was tested.",
        ("broken", "failed"),
        r"(?s).*\bFaultNotObserved\b.*",
    ),
    Category(
        "Harness or Docker error",
        "raychaos or the Docker engine failed (ChaosError subclasses, docker-py errors); "
        "says nothing about Ray.",
        ("broken", "failed"),
        r"(?s).*(?:\b(?:" + "|".join(_harness_names()) + r")\b|docker\.errors\.).*",
    ),
    Category(
        "Timing outside the documented window",
        "Ray did the right thing, but outside the time window its docs and knobs imply.",
        ("failed",),
        r"(?s).*(?:outside \[|not within).*",
    ),
    Category(
        "Ray behaviour contradicts its docs",
        "An assertion about documented Ray behaviour failed.",
        ("failed",),
        r"(?s).*AssertionError.*",
    ),
    Category(
        "Unexpected exception (harness bug)",
        "An exception that is neither an assertion nor a ChaosError: a bug in the harness "
        "or the experiment.",
        ("broken",),
        r"(?s).*",
    ),
)


#: Categories that say nothing about Ray (shown as broken even when Allure says failed).
NOT_ABOUT_RAY = frozenset({"Fault not observed / inconclusive", "Harness or Docker error"})


def categorize(status: str, message: str) -> str | None:
    """The name of the first category matching, as Allure would pick it."""
    return next((c.name for c in CATEGORIES if c.matches(status, message)), None)


# -- loaded results --------------------------------------------------------------------------
@dataclass(frozen=True)
class Attachment:
    name: str
    source: str
    type: str


@dataclass
class Outcome:
    """One test result (after retries are folded), with its fixtures' attachments."""

    uuid: str
    name: str
    full_name: str
    history_id: str
    status: str
    message: str
    trace: str
    start: int
    stop: int
    claims: tuple[str, ...]
    ray_version: str
    labels: tuple[tuple[str, str], ...] = ()
    attachments: list[Attachment] = field(default_factory=list)

    @property
    def effective_status(self) -> str:
        """``finding`` for an xfail whose reason starts with FINDING:, else the Allure status."""
        if self.status == "skipped" and FINDING.match(self.message):
            return "finding"
        if self.status == "failed" and self.category in NOT_ABOUT_RAY:
            # The fixtures turn ChaosError into pytest.fail (Allure: failed); on this page
            # "failed" means Ray contradicted its docs, so a harness failure shows as broken.
            return "broken"
        return self.status

    @property
    def category(self) -> str | None:
        return categorize(self.status, self.message)


@dataclass
class Results:
    directory: Path
    outcomes: list[Outcome]
    #: environment.properties as read.
    environment: dict[str, str]
    executor: dict[str, Any]
    #: Attachment bodies the page embeds (timelines, measurements), by source file name.
    blobs: dict[str, bytes]
    #: Files that could not be read, with why.
    problems: list[str]


def _attachments(node: Mapping[str, Any]) -> list[Attachment]:
    """Attachments of an executable item and of its steps, depth first."""
    found = [
        Attachment(str(a.get("name", "")), str(a.get("source", "")), str(a.get("type", "")))
        for a in node.get("attachments") or []
        if a.get("source")
    ]
    for step in node.get("steps") or []:
        found += _attachments(step)
    return found


def _unquote(value: str) -> str:
    # allure.dynamic.parameter stores repr(value): "'2.60.0'".
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def outcome_from_json(data: Mapping[str, Any]) -> Outcome:
    details = data.get("statusDetails") or {}
    labels = tuple(
        (str(x.get("name", "")), str(x.get("value", ""))) for x in data.get("labels", [])
    )
    version = next(
        (
            _unquote(str(p.get("value", "")))
            for p in data.get("parameters", [])
            if p.get("name") == PARAMETER
        ),
        "",
    )
    return Outcome(
        uuid=str(data.get("uuid", "")),
        name=str(data.get("name", "")),
        full_name=str(data.get("fullName", data.get("name", ""))),
        history_id=str(data.get("historyId") or data.get("uuid", "")),
        status=str(data.get("status") or "unknown"),
        message=str(details.get("message") or ""),
        trace=str(details.get("trace") or ""),
        start=int(data.get("start") or 0),
        stop=int(data.get("stop") or 0),
        claims=tuple(sorted({v for n, v in labels if n == "claim"})),
        ray_version=version,
        labels=labels,
        attachments=_attachments(data),
    )


def fold_retries(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """One outcome per historyId, the latest (Allure shows the others as retries)."""
    latest: dict[str, Outcome] = {}
    for outcome in outcomes:
        seen = latest.get(outcome.history_id)
        if seen is None or (outcome.stop, outcome.start) >= (seen.stop, seen.start):
            latest[outcome.history_id] = outcome
    return sorted(latest.values(), key=lambda o: (o.full_name, o.ray_version, o.name))


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` (the subset we write): ``key=value``, ``\\`` escapes, # comments."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key: list[str] = []
        value: list[str] = []
        target, escaped = key, False
        for ch in line:
            if escaped:
                target.append(ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif target is key and ch in "=:":
                target = value
            else:
                target.append(ch)
        found["".join(key).strip()] = "".join(value).strip()
    return found


def load_results(directory: Path) -> Results:
    """Read an Allure results directory; unreadable files are listed, never fatal."""
    if not directory.is_dir():
        raise ChaosError(
            f"expected a directory of Allure results, {directory} is not one",
            hint="run pytest with --alluredir=DIR first, then `raychaos report DIR`",
        )
    problems: list[str] = []

    def read_json(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: {exc}")
            return None

    raw = [read_json(p) for p in sorted(directory.glob("*-result.json"))]
    outcomes = [outcome_from_json(d) for d in raw if isinstance(d, dict)]
    by_uuid = {o.uuid: o for o in outcomes}
    # Fixture set-up/tear-down attachments (the experiment fixture's history, timeline and
    # measurements) live in container files, linked to tests by their uuid.
    for path in sorted(directory.glob("*-container.json")):
        container = read_json(path)
        if not isinstance(container, dict):
            continue
        extra = [
            a
            for f in [*container.get("befores", []), *container.get("afters", [])]
            for a in _attachments(f)
        ]
        for child in container.get("children", []):
            if child in by_uuid:
                by_uuid[child].attachments += extra
    folded = fold_retries(outcomes)
    blobs: dict[str, bytes] = {}
    for attachment in (a for o in folded for a in o.attachments):
        if attachment.type == "image/png" or attachment.name == MEASUREMENTS:
            try:
                blobs[attachment.source] = (directory / attachment.source).read_bytes()
            except OSError as exc:
                problems.append(f"attachment {attachment.source} ({attachment.name}): {exc}")
    environment: dict[str, str] = {}
    env_file = directory / "environment.properties"
    if env_file.is_file():
        environment = parse_properties(env_file.read_text(encoding="utf-8"))
    executor = (
        read_json(directory / "executor.json") if (directory / "executor.json").is_file() else None
    )
    return Results(
        directory=directory,
        outcomes=folded,
        environment=environment,
        executor=executor if isinstance(executor, dict) else {},
        blobs=blobs,
        problems=problems,
    )


def load_claims(path: Path | None = None) -> list[tuple[str, str]]:
    """(claim id, fault) pairs from the shipped ``claims.txt`` (``ID<TAB>fault`` a line)."""
    if path is None:
        from chaos.resources import fixtures_path

        path = fixtures_path("claims.txt")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ChaosError(
            f"cannot read the claim list {path}: {exc.strerror}",
            hint="reinstall raychaos (claims.txt ships in chaos/fixtures)",
        ) from exc
    claims: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            claim, _, fault = line.partition("\t")
            claims.append((claim.strip(), fault.strip()))
    return claims


# -- the matrix ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    status: str
    #: (test name, effective status) of every test behind the cell.
    tests: tuple[tuple[str, str], ...] = ()


def worst(statuses: Iterable[str]) -> str:
    ranked = [s for s in statuses if s in STATUS_ORDER]
    return min(ranked, key=STATUS_ORDER.index) if ranked else NOT_RUN


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-]", version))


def versions_of(outcomes: Iterable[Outcome]) -> list[str]:
    found = {o.ray_version for o in outcomes if o.claims and o.ray_version}
    return sorted(found, key=_version_key) or ["—"]


def claim_matrix(
    outcomes: Sequence[Outcome], claim_ids: Sequence[str], versions: Sequence[str]
) -> dict[tuple[str, str], Cell]:
    """(claim, Ray version) → the worst outcome of the tests carrying that claim."""
    tests: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for outcome in outcomes:
        version = outcome.ray_version or versions[0]
        for claim in outcome.claims:
            tests.setdefault((claim, version), []).append((outcome.name, outcome.effective_status))
    every = list(dict.fromkeys([*claim_ids, *(c for c, _ in tests)]))
    return {
        (claim, version): Cell(
            worst(s for _, s in tests.get((claim, version), [])),
            tuple(tests.get((claim, version), [])),
        )
        for claim in every
        for version in versions
    }


def measurements_of(outcome: Outcome, blobs: Mapping[str, bytes]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for attachment in outcome.attachments:
        if attachment.name != MEASUREMENTS or attachment.source not in blobs:
            continue
        try:
            data = json.loads(blobs[attachment.source])
        except ValueError:
            continue
        if isinstance(data, dict):
            rows += [(str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in data.items()]
    return rows


# -- HTML ------------------------------------------------------------------------------------
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
.notrun{background:#fff;color:#9e9e9e;font-weight:400}
tr.fam th{background:#e8eef6}pre{white-space:pre-wrap;background:#f7f7f7;padding:8px;margin:4px 0;
max-height:320px;overflow:auto;font-size:12px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;margin-right:6px;font-weight:600}
img{max-width:100%;border:1px solid #eee}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _status(status: str, text: str | None = None) -> str:
    css = "notrun" if status == NOT_RUN else status
    return f'<span class="pill {_e(css)}">{_e(text or status)}</span>'


def _summary(
    results: Results, cells: Mapping[tuple[str, str], Cell], claim_ids: Sequence[str]
) -> str:
    counts: dict[str, int] = {}
    for outcome in results.outcomes:
        counts[outcome.effective_status] = counts.get(outcome.effective_status, 0) + 1
    per_claim = {c: [cell.status for (cc, _), cell in cells.items() if cc == c] for c in claim_ids}
    verified = sum(
        1 for s in per_claim.values() if s and all(x in ("passed", "finding") for x in s)
    )
    pills = " ".join(_status(s, f"{s} {counts[s]}") for s in STATUS_ORDER if s in counts)
    return (
        f"<p>{len(results.outcomes)} results: {pills or 'none'}</p>"
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
    for claim, fault in [*claims, *((c, "not in CLAIMS.md") for c in extra)]:
        prefix = claim.split("-", 1)[0]
        if prefix != family:
            family = prefix
            feature = FAMILIES[prefix].feature if prefix in FAMILIES else prefix
            rows.append(
                f'<tr class="fam"><th colspan="{len(versions) + 2}">{_e(feature)}</th></tr>'
            )
        tds = []
        for version in versions:
            cell = cells.get((claim, version), Cell(NOT_RUN))
            tip = (
                "; ".join(f"{n}: {s}" for n, s in cell.tests) or "no experiment carries this claim"
            )
            css = "notrun" if cell.status == NOT_RUN else cell.status
            shown = cell.status
            if len(cell.tests) > 1:
                shown += f" ({sum(1 for _, s in cell.tests if s == cell.status)}/{len(cell.tests)})"
            tds.append(f'<td class="s {_e(css)}" title="{_e(tip)}">{_e(shown)}</td>')
        rows.append(f"<tr><th>{_e(claim)}</th><td>{_e(fault)}</td>{''.join(tds)}</tr>")
    return f"<table><tr><th>claim</th><th>fault</th>{head}</tr>{''.join(rows)}</table>"


def _outcome_title(outcome: Outcome) -> str:
    claims = ", ".join(outcome.claims) or "no claim"
    version = f" · Ray {_e(outcome.ray_version)}" if outcome.ray_version else ""
    where = f"{_e(outcome.full_name)} · {_e(claims)}{version}"
    return f"<b>{_e(outcome.name)}</b> <span class='muted'>{where}</span>"


def _findings(outcomes: Sequence[Outcome]) -> str:
    found = [o for o in outcomes if o.effective_status == "finding"]
    if not found:
        return '<p class="muted">None.</p>'
    return "".join(
        f'<div class="card">{_status("finding")}{_outcome_title(o)}'
        f"<pre>{_e(FINDING.sub('FINDING:', o.message.split(chr(10) * 2)[0], count=1))}</pre></div>"
        for o in found
    )


def _failures(outcomes: Sequence[Outcome]) -> str:
    bad = [o for o in outcomes if o.status in ("failed", "broken")]
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
            f'<div class="card">{_status(o.status)}{_outcome_title(o)}'
            f"<div>category: <b>{_e(o.category or 'uncategorised')}</b></div>"
            f"<pre>{_e(o.message or '(no message)')}</pre>{trace}</div>"
        )
    return "".join(cards)


def _measurements(outcomes: Sequence[Outcome], blobs: Mapping[str, bytes]) -> str:
    rows = [
        f"<tr><td>{_e(o.name)}</td><td>{_e(o.ray_version)}</td><td>{_status(o.effective_status)}</td>"
        f"<td>{_e(name)}</td><td>{_e(value)}</td></tr>"
        for o in outcomes
        for name, value in measurements_of(o, blobs)
    ]
    if not rows:
        return '<p class="muted">No measurements attached.</p>'
    return (
        "<table><tr><th>experiment</th><th>Ray</th><th>outcome</th><th>measurement</th>"
        f"<th>value</th></tr>{''.join(rows)}</table>"
    )


def _timelines(outcomes: Sequence[Outcome], blobs: Mapping[str, bytes]) -> str:
    figures = []
    for o in outcomes:
        for a in o.attachments:
            if a.type == "image/png" and a.source in blobs:
                data = base64.b64encode(blobs[a.source]).decode("ascii")
                figures.append(
                    f'<figure class="card"><figcaption>{_status(o.effective_status)}'
                    f"{_outcome_title(o)} · {_e(a.name)}</figcaption>"
                    f'<img alt="{_e(a.name)} of {_e(o.name)}" src="data:image/png;base64,{data}">'
                    "</figure>"
                )
    return "".join(figures) or '<p class="muted">No timelines attached.</p>'


def render_html(
    results: Results, claims: Sequence[tuple[str, str]], *, generated: datetime | None = None
) -> str:
    """The whole page as one string: inline CSS, inline images, no scripts."""
    claim_ids = [c for c, _ in claims]
    versions = versions_of(results.outcomes)
    cells = claim_matrix(results.outcomes, claim_ids, versions)
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
            ("finding", "finding: Ray contradicts its docs, recorded as strict xfail"),
            ("failed", "failed: Ray contradicts its docs (new)"),
            ("broken", "broken: harness, Docker or inconclusive"),
            ("skipped", "skipped"),
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
<h2>Findings</h2>
{_findings(results.outcomes)}
<h2>Failures and broken experiments</h2>
{_failures(results.outcomes)}
<h2>Measured recovery windows</h2>
{_measurements(results.outcomes, results.blobs)}
<h2>Timelines</h2>
{_timelines(results.outcomes, results.blobs)}
{problems}
</body></html>
"""


def write_report(results_dir: Path, output: Path, claims_file: Path | None = None) -> Results:
    """Load ``results_dir``, render the page to ``output``; returns what was loaded."""
    results = load_results(results_dir)
    page = render_html(results, load_claims(claims_file))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(page, encoding="utf-8")
    return results
