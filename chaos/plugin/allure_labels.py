"""The Allure labels of a running raychaos test: the one path that labels a live test.

:func:`label_running_test` applies :func:`chaos.report.labels.labels_of`; the hooks in
:mod:`chaos.plugin.allure` call it once per test at the end of set-up (passed, failed or
skipped), so a test whose cluster never booted still carries its claims. :func:`label_claims`
adds the postconditions checked at teardown; :func:`finding_of` tells a recorded finding.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chaos.plugin.items import engine_of
from chaos.report.claims import PARAMETER
from chaos.report.labels import labels_of


def label_running_test(item: pytest.Item, ray_version: str) -> None:
    """Add :func:`labels_of` to the Allure result of the running test ``item``.

    Call it for raychaos tests only, once per test, while allure-pytest has the test's
    result open (any time from set-up to teardown). Without ``--alluredir`` it does nothing.
    """
    import allure

    # The parameter first: it marks the result as raychaos' even if a claim id is unknown.
    allure.dynamic.parameter(PARAMETER, ray_version, excluded=True)
    found = labels_of(item, ray_version, engine_of(item))
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
