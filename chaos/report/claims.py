"""Claim families → Allure structure: feature, documentation link, severity.

Pure functions of claim ids (the claims and their families are in
:mod:`chaos.report.catalogue`): the one place that says which labels and links a claim gives a
test. :mod:`chaos.plugin.allure_labels` applies them to a running test,
:mod:`chaos.plugin.results.crash` writes them into the result of a test whose xdist worker
died; both read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from chaos.report.catalogue import SEVERITIES, Family, load_catalogue

EPIC = "Ray fault tolerance"
#: The excluded Allure parameter naming the Ray version a raychaos test ran against.
#: The excluded Allure parameter that marks a result as raychaos's and names its Ray release
#: (the test id's ``ray_version`` parameter may belong to anyone's parametrisation).
PARAMETER = "raychaos.ray_version"
#: The Allure label of a recorded finding: the class of the exception a test's strict xfail
#: names in ``raises=``, written by :mod:`chaos.plugin.allure` only when the test raised it.
#: Coverage counts a finding from this label, never from a message (a ``pytest.skip`` or an
#: imperative ``pytest.xfail`` saying "FINDING:" is not one).
FINDING_LABEL = "raychaos.finding"
#: The claims a test's recorded finding is about (:attr:`chaos.errors.Finding.claims` of the
#: exception its xfail names), one label each, written at set-up: the test's other claims keep
#: their own verdicts. Results without it (schema 2) hold findings about every claim.
FINDING_ABOUT_LABEL = "raychaos.finding.claim"
#: An inconclusive result: the host was too busy to judge (:mod:`chaos.check.stalls`); its
#: value names the stall. Counted apart by coverage, compare, report and bench.
INCONCLUSIVE_LABEL = "raychaos.inconclusive"
#: Marks results written by a raychaos that labels its findings. A result without it is never
#: counted as a finding, whatever its message says (``raychaos coverage`` lists such results).
SCHEMA_LABEL = "raychaos.schema"
SCHEMA = "3"


def families() -> Mapping[str, Family]:
    """The shipped catalogue's families, by id (``fixtures/claims.toml``)."""
    return load_catalogue().families


def family(claim: str) -> Family:
    prefix = claim.split("-", 1)[0]
    known = families()
    if prefix not in known:
        raise ValueError(f"unknown claim id {claim!r}: expected a prefix among {', '.join(known)}")
    return known[prefix]


def worst_severity(severities: Iterable[str]) -> str:
    """The worst of ``severities`` in Allure's order (blocker first)."""
    return min(severities, key=SEVERITIES.index)


def claim_labels(claims: Sequence[str], stories: Sequence[str]) -> list[tuple[str, str]]:
    """(name, value) Allure labels of a test verifying ``claims``: none without a claim.

    epic, one feature per family (first seen first), severity = the worst family, one story
    per entry of ``stories`` (whole, never cut), then per claim id a ``claim`` label (what
    raychaos' own tools read) and a ``tag`` (what Allure's UI shows on the test).
    """
    if not claims:
        return []
    families = [family(c) for c in claims]
    return [
        ("epic", EPIC),
        *(("feature", f) for f in dict.fromkeys(f.feature for f in families)),
        ("severity", worst_severity(f.severity for f in families)),
        *(("story", s) for s in dict.fromkeys(stories)),
        *(("claim", c) for c in claims),
        *(("tag", c) for c in claims),
    ]


def claim_title(claims: Sequence[str], name: str) -> str:
    """``[NODE-01, NODE-02] test_x[2.60.0]``: the claim ids in front of a test's name."""
    prefix = f"[{', '.join(claims)}] " if claims else ""
    return name if not prefix or name.startswith(prefix) else prefix + name


_TITLE_PREFIX = re.compile(r"^\[[A-Z]+-\d+(?:, [A-Z]+-\d+)*\] ")


def untitled(name: str) -> str:
    """A test's name without the claim ids :func:`claim_title` put in front (results written
    before titles carried them compare equal)."""
    return _TITLE_PREFIX.sub("", name, count=1)


def claim_links(claims: Sequence[str]) -> list[tuple[str, str]]:
    """(url, name) documentation links of ``claims``, one per URL (first family names it).

    One per URL because allure-pytest drops a dynamic link whose URL the test already has
    (NODE and NET share a page).
    """
    links: dict[str, str] = {}
    for claim in claims:
        fam = family(claim)
        links.setdefault(fam.doc, f"Ray docs: {fam.feature}")
    return list(links.items())
