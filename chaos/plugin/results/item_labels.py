"""The Allure labels of a raychaos test, from its markers and the claim catalogue.

:func:`labels_of` is what a test carries: :mod:`chaos.plugin.allure_labels` applies it to a
running test, and the crash results of :mod:`chaos.plugin.results.crash` are built from it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from chaos.report.catalogue import load_catalogue
from chaos.report.claims import (
    SCHEMA,
    SCHEMA_LABEL,
    claim_labels,
    claim_links,
    claim_title,
)


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


def labels_of(item: pytest.Item, ray_version: str, engine: str) -> ItemLabels:
    """The labels, links and parameter of raychaos test ``item``; ``engine`` names the Docker
    engine its clusters run on (:func:`chaos.plugin.items.engine_of`)."""
    claims = claims_of(item)
    return ItemLabels(
        labels=(
            *claim_labels(claims, stories_of(item, claims)),
            (ENGINE_LABEL, engine),
            (SCHEMA_LABEL, SCHEMA),
        ),
        links=tuple(claim_links(claims)),
        ray_version=ray_version,
        title=title_of(item, claims),
    )
