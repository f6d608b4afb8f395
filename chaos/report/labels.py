"""Which tests are raychaos tests, and the Allure labels a running one gets (one path).

:func:`label_running_test` is the only code that labels a live test; the hooks in
:mod:`chaos.report.allure` call it once per test, at the end of set-up (passed, failed or
skipped), so a test whose cluster never booted still carries its claims. :func:`labels_of`
is what it applies; the crash results of :mod:`chaos.report.crash` are built from it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from chaos.report.catalogue import load_catalogue
from chaos.report.claims import (
    PARAMETER,
    SCHEMA,
    SCHEMA_LABEL,
    claim_labels,
    claim_links,
    claim_title,
)
from chaos.testkit import engine_of, ran_raychaos, uses_raychaos

__all__ = ["ran_raychaos", "uses_raychaos"]


def claims_of(item: pytest.Item) -> list[str]:
    """The claim ids of every ``claim`` mark on ``item`` (module, class, function), sorted."""
    return sorted({str(c) for m in item.iter_markers("claim") for c in m.args})


def story_of(item: pytest.Item) -> str:
    """The first paragraph of the test function's docstring, whole (its lines joined), else
    the test's name."""
    obj = getattr(item, "obj", None)
    doc = ((getattr(obj, "__doc__", None) or "") if obj is not None else "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else item.name


def claim_story(claim: str) -> str | None:
    """A claim as Allure's Behaviors tree shows it: ``TASK-03: <fault> → <outcome>``, whole,
    from the catalogue (None for an id it does not know)."""
    catalogue = load_catalogue()
    if claim not in catalogue:
        return None
    found = catalogue.get(claim)
    return f"{found.id}: {found.fault} → {found.outcome}"


def stories_of(item: pytest.Item, claims: Sequence[str]) -> list[str]:
    """One story per claim (its catalogue text); the docstring's for ids it does not know."""
    return [claim_story(c) or story_of(item) for c in claims]


def title_of(item: pytest.Item, claims: Sequence[str]) -> str | None:
    """The test's Allure title with its claim ids in front, or None when the test has an
    ``@allure.title`` of its own (a team's title is left as it is)."""
    if getattr(getattr(item, "obj", None), "__allure_display_name__", None):
        return None
    return claim_title(claims, item.name) if claims else None


@dataclass(frozen=True)
class ItemLabels:
    """What a raychaos test carries in Allure beyond what allure-pytest gives every test."""

    #: (name, value) labels: epic, features, severity, story, claims, the engine, the schema.
    labels: tuple[tuple[str, str], ...]
    #: (url, name) documentation links.
    links: tuple[tuple[str, str], ...]
    #: The Ray version, an *excluded* parameter (not part of Allure's historyId).
    ray_version: str
    #: The test's name with its claim ids in front (None: no claim, or a title of its own).
    title: str | None = None


#: The Allure label naming the Docker engine a test's clusters ran on (its URL, no password).
ENGINE_LABEL = "engine"


def labels_of(item: pytest.Item, ray_version: str) -> ItemLabels:
    """The labels, links and parameter of raychaos test ``item`` (see :func:`uses_raychaos`).

    The engine is the one the test's clusters were given, else the one its process is planned
    to boot on (at collection, which the crash result of a dead worker is built from).
    """
    claims = claims_of(item)
    return ItemLabels(
        labels=(
            *claim_labels(claims, stories_of(item, claims)),
            (ENGINE_LABEL, engine_of(item)),
            (SCHEMA_LABEL, SCHEMA),
        ),
        links=tuple(claim_links(claims)),
        ray_version=ray_version,
        title=title_of(item, claims),
    )


def label_running_test(item: pytest.Item, ray_version: str) -> None:
    """Add :func:`labels_of` to the Allure result of the running test ``item``.

    Call it for raychaos tests only, once per test, while allure-pytest has the test's
    result open (any time from set-up to teardown). Without ``--alluredir`` it does nothing.
    """
    import allure

    # The parameter first: it marks the result as raychaos' even if a claim id is unknown.
    allure.dynamic.parameter(PARAMETER, ray_version, excluded=True)
    found = labels_of(item, ray_version)
    for name, value in found.labels:
        allure.dynamic.label(name, value)
    for url, title in found.links:
        allure.dynamic.link(url, name=title)
    if found.title is not None:
        allure.dynamic.title(found.title)


def label_claims(claims: Sequence[str]) -> None:
    """Add ``claim`` labels to the running test: postconditions checked at teardown."""
    import allure

    for claim in claims:
        allure.dynamic.label("claim", claim)
        allure.dynamic.tag(claim)


def finding_of(item: pytest.Item, error: BaseException) -> str | None:
    """The class name of ``error`` when it is ``item``'s recorded finding, else None.

    A recorded finding is an exception that a strict xfail whose reason starts with
    ``FINDING:`` names in ``raises=``: an imperative ``pytest.xfail``, a skip, a non-strict
    xfail or one without ``raises=`` records nothing. The xfail that applies is the first whose
    conditions hold (pytest's rule); one with a string condition is not evaluated here, so it
    records nothing.
    """
    for mark in item.iter_markers("xfail"):
        conditions = (mark.kwargs["condition"],) if "condition" in mark.kwargs else mark.args
        if any(isinstance(c, str) for c in conditions):
            return None
        if conditions and not any(conditions):
            continue
        strict = mark.kwargs.get("strict", item.config.getini("xfail_strict"))
        raises = mark.kwargs.get("raises")
        reason = str(mark.kwargs.get("reason", ""))
        if not (strict and raises is not None and reason.startswith("FINDING:")):
            return None
        if isinstance(error, pytest.xfail.Exception):
            return None
        matched = (
            isinstance(error, raises)
            if isinstance(raises, type | tuple)
            else bool(getattr(raises, "matches", lambda e: False)(error))  # pytest.RaisesExc
        )
        return type(error).__name__ if matched else None
    return None
