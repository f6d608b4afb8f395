"""Claim families → Allure structure: feature, documentation link, severity.

Pure functions of claim ids (the claims themselves are in :mod:`chaos.report.catalogue`):
the one family table, and the one place that says which labels and links a claim gives a
test. :mod:`chaos.plugin.allure_labels` applies them to a running test, :mod:`chaos.report.crash`
writes them into the result of a test whose xdist worker died; both read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DOCS = "https://docs.ray.io/en/latest/ray-core"
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
#: Marks results written by a raychaos that labels its findings; results without it (an older
#: raychaos) are read by their xfail message, ``XFAIL FINDING: …``.
SCHEMA_LABEL = "raychaos.schema"
SCHEMA = "2"
#: Allure's severities, worst first: a test's severity is the worst of its claims' families.
SEVERITIES = ("blocker", "critical", "normal", "minor", "trivial")


@dataclass(frozen=True)
class Family:
    feature: str
    doc: str
    #: Allure severity by blast radius: the cluster, a node, or one task/actor/object.
    severity: str


FAMILIES = {
    "TASK": Family("Tasks", f"{DOCS}/fault_tolerance/tasks.html", "normal"),
    "OBJ": Family("Objects", f"{DOCS}/fault_tolerance/objects.html", "normal"),
    "ACTOR": Family("Actors", f"{DOCS}/fault_tolerance/actors.html", "normal"),
    "NODE": Family("Nodes and raylets", f"{DOCS}/fault_tolerance/nodes.html", "critical"),
    "GCS": Family("Head and GCS", f"{DOCS}/fault_tolerance/gcs.html", "blocker"),
    "NET": Family("Network", f"{DOCS}/fault_tolerance/nodes.html", "critical"),
    "STORE": Family("Object store", f"{DOCS}/objects/object-spilling.html", "normal"),
    "OOM": Family("Memory", f"{DOCS}/scheduling/ray-oom-prevention.html", "critical"),
    "VER": Family("Version skew", "https://docs.ray.io/en/latest/cluster/faq.html", "critical"),
    "SCHED": Family("Scheduling", f"{DOCS}/scheduling/index.html", "normal"),
    "PEND": Family("Pending work", f"{DOCS}/scheduling/index.html", "normal"),
    "TENANT": Family("Multi-tenancy", f"{DOCS}/namespaces.html", "normal"),
    "SERVE": Family(
        "Ray Serve",
        "https://docs.ray.io/en/latest/serve/production-guide/fault-tolerance.html",
        "critical",
    ),
    "CHURN": Family("Production churn", f"{DOCS}/fault_tolerance.html", "critical"),
    "AUTOSCALE": Family(
        "Autoscaling",
        "https://docs.ray.io/en/latest/cluster/vms/user-guides/configuring-autoscaling.html",
        "critical",
    ),
    "ADVICE": Family("Runbook advice", f"{DOCS}/configure.html", "minor"),
    "INV": Family("Invariants", f"{DOCS}/fault_tolerance.html", "normal"),
}


def family(claim: str) -> Family:
    prefix = claim.split("-", 1)[0]
    if prefix not in FAMILIES:
        raise ValueError(
            f"unknown claim id {claim!r}: expected a prefix among {', '.join(FAMILIES)}"
        )
    return FAMILIES[prefix]


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
