"""Experiments selected by claim: ``--raychaos-claims`` and the check of ``claim`` marker ids.

pytest hooks, registered by :mod:`chaos.plugin`:

* Every id in a ``@pytest.mark.claim(...)`` must be in the claim catalogue
  (``fixtures/claims.toml``); an unknown one is a usage error naming the test, the id and the
  nearest known ids — before anything runs, not after an hour of experiments.
* A finding's exception class (:class:`chaos.errors.Finding`) names only claims its test
  carries: a typo is a usage error, not a finding silently about every claim.
* ``--raychaos-claims OBJ-*,TASK-01`` (ids or fnmatch patterns, any case) keeps the tests that
  verify a matching claim and deselects the rest (``pytest_deselected``, as ``-k`` does). A
  pattern that matches no claim is a usage error. The postconditions INV-01 and INV-02 are
  verified by every test that uses raychaos' ``experiment`` fixture.

Inert when no collected test carries a ``claim`` marker and ``--raychaos-claims`` is not given:
the catalogue is not even read.
"""

from __future__ import annotations

import pytest

from chaos.errors import ChaosError
from chaos.experiment import POSTCONDITIONS
from chaos.plugin.allure_labels import stray_finding_claims
from chaos.plugin.keys import SETTINGS_KEY
from chaos.plugin.results.item_labels import claims_of

#: Where raychaos' ``experiment`` fixture is defined (another plugin may have one of that name).
FIXTURES_MODULE = "chaos.plugin.fixtures"
#: At most this many unknown ids are listed (one line each) before "and N more".
SHOWN = 10


def _uses_our_experiment(item: pytest.Item) -> bool:
    """``item`` uses raychaos' ``experiment`` fixture (not another plugin's of that name)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}).get("experiment", ())
    return bool(defs) and getattr(defs[-1].func, "__module__", "") == FIXTURES_MODULE


def verified_by(item: pytest.Item) -> set[str]:
    """The claim ids ``item`` verifies: its markers', and the postconditions of ``experiment``."""
    found = set(claims_of(item))
    if _uses_our_experiment(item):
        found.update(POSTCONDITIONS)
    return found


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    settings = config.stash.get(SETTINGS_KEY, None)
    patterns = settings.claims if settings is not None else ()
    marked = [(item, claims_of(item)) for item in items]
    marked = [(item, ids) for item, ids in marked if ids]
    if not marked and not patterns:
        return
    from chaos.report.catalogue import load_catalogue

    try:
        catalogue = load_catalogue()
    except ChaosError as exc:
        raise pytest.UsageError(f"raychaos: {exc}") from None
    unknown = [
        f"  {item.nodeid}: {catalogue.unknown_message(claim)}"
        for item, ids in marked
        for claim in ids
        if claim not in catalogue
    ]
    if unknown:
        more = f"\n  … and {len(unknown) - SHOWN} more" if len(unknown) > SHOWN else ""
        raise pytest.UsageError(
            "raychaos: unknown claim id in @pytest.mark.claim (`raychaos claims` lists them):\n"
            + "\n".join(unknown[:SHOWN])
            + more
        )
    stray = [
        f"  {item.nodeid}: {found} is not among its claims ({', '.join(ids)})"
        for item, ids in marked
        for found in stray_finding_claims(item)
    ]
    if stray:
        raise pytest.UsageError(
            "raychaos: a finding's exception names a claim its test does not carry "
            "(chaos.errors.Finding.claims; fix the class or the @pytest.mark.claim):\n"
            + "\n".join(stray[:SHOWN])
        )
    if not patterns:
        return
    try:
        wanted = set(catalogue.select(patterns))
    except ChaosError as exc:
        source = settings.sources.get("claims", "--raychaos-claims") if settings else ""
        raise pytest.UsageError(f"--raychaos-claims (from {source}): {exc}") from None
    keep = [item for item in items if verified_by(item) & wanted]
    drop = [item for item in items if not verified_by(item) & wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
