"""Allure categories: why a raychaos test failed, as Allure's Categories tab and the HTML page
show it (``categories.json`` and :func:`categorize` read the same list)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chaos.errors import ChaosError, CheckFailed, FaultNotObserved


@dataclass(frozen=True)
class Category:
    """An Allure category: it matches the whole message (Java ``matches``, DOTALL)."""

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


def _names(root: type[BaseException]) -> list[str]:
    return sorted({root.__name__} | {c.__name__ for c in _subclasses(root)})


def _harness_names() -> list[str]:
    # Derived from the hierarchy so a new ChaosError subclass is categorised without an edit.
    # A CheckFailed is a verdict on Ray, an inconclusive one says nothing: neither is harness.
    apart = {*_names(FaultNotObserved), *_names(CheckFailed)}
    return sorted(n for n in _names(ChaosError) if n not in apart)


#: A recorded finding: an xfail whose reason starts with FINDING: (allure-pytest: skipped,
#: "XFAIL FINDING: …").
FINDING = "Finding: Ray differs from its docs"
#: A recorded finding that goes either way run to run (:class:`chaos.errors.Intermittent`: a
#: race inside Ray lost, Ray crashing); :mod:`chaos.plugin.allure` gives its result the
#: message ``XFAIL INTERMITTENT FINDING (<class>): <reason>``.
INTERMITTENT = "Finding: a race or crash inside Ray"
#: A verdict the host was too busy to give (:mod:`chaos.check.stalls`).
INCONCLUSIVE = "Inconclusive: the host was too busy to judge"
INTERMITTENT_PREFIX = "XFAIL INTERMITTENT FINDING"
#: A recorded finding whose test passed: pytest fails a strict xfail that passes
#: ("[XPASS(strict)] FINDING: …", the message :mod:`chaos.plugin.allure` gives the result).
FINDING_GONE = "Finding no longer reproduces"

#: Order matters: Allure files a result under the first category that matches (releases before
#: allure2 PR #3330 under every one that matches), so specific causes come before the generic
#: AssertionError, and findings come first of all (a FINDING reason may say "not within" or
#: name an error class). Harness errors are matched as "failed" too: the plugin's fixtures turn
#: a ChaosError into ``pytest.fail("ClusterBootTimeout: …")``, which Allure records as failed.
CATEGORIES: tuple[Category, ...] = (
    Category(
        INCONCLUSIVE,
        "The nodes the verdict depends on waited for a CPU for a material part of the judged "
        "window (their cgroups' pressure stall information): the host was too busy to judge, "
        "so the run says nothing about Ray, passed or failed. Not a reason to widen the "
        "window: run fewer clusters at a time, or on a quieter machine.",
        ("broken", "skipped"),
        r"(?s)INCONCLUSIVE:.*",
    ),
    Category(
        INTERMITTENT,
        "This run lost a race inside Ray, or a Ray process crashed, where the docs promise an "
        "orderly outcome: the claim did not hold in this run. Such a finding goes either way "
        "from run to run; the report says in how many runs the claim held.",
        ("skipped",),
        r"(?s)XFAIL INTERMITTENT FINDING.*",
    ),
    Category(
        FINDING,
        "The pinned Ray release contradicts its documentation here, and the experiment records "
        "it as a strict xfail whose reason (the message) states what was measured. Expected: "
        "not a failure of this run.",
        ("skipped",),
        r"(?s)(?:XFAIL )?FINDING:.*",
    ),
    Category(
        FINDING_GONE,
        "A recorded finding's experiment passed: Ray now behaves as documented here (a fix, "
        "or the experiment no longer sees the difference). Not a regression: check the "
        "evidence, then remove the experiment's xfail marker.",
        ("failed", "broken"),
        r"(?s)\[XPASS\(strict\)\] FINDING:.*",
    ),
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
        r"(?s).*\b(?:" + "|".join(_names(FaultNotObserved)) + r")\b.*",
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
        r"(?s).*(?:AssertionError|\b(?:" + "|".join(_names(CheckFailed)) + r")\b).*",
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
NOT_ABOUT_RAY = frozenset(
    {INCONCLUSIVE, "Fault not observed / inconclusive", "Harness or Docker error"}
)


def categorize(status: str, message: str) -> str | None:
    """The name of the first category matching, as Allure picks it."""
    return next((c.name for c in CATEGORIES if c.matches(status, message)), None)


def merge_categories(existing: Sequence[Any], ours: Sequence[Category]) -> list[Any]:
    """``categories.json`` content: the repository's own categories first, then ours.

    Theirs first because Allure files a result under the first match and ours end in broad
    catch-alls (any AssertionError, any broken test): appended, they only classify what the
    repository's own categories leave out, and never re-file its tests. A category of ours
    already in the file (from an earlier raychaos run into the same directory) is replaced,
    not repeated. Entries that are not categories are kept as they were.
    """
    names = {c.name for c in ours}
    kept = [c for c in existing if not (isinstance(c, dict) and c.get("name") in names)]
    return [*kept, *(c.to_allure() for c in ours)]
