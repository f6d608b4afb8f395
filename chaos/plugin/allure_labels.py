"""The Allure labels of a running raychaos test: the one path that labels a live test.

:func:`label_running_test` applies :func:`chaos.plugin.results.item_labels.labels_of`; the hooks in
:mod:`chaos.plugin.allure` call it once per test at the end of set-up (passed, failed or
skipped), so a test whose cluster never booted still carries its claims. :func:`label_claims`
adds the postconditions checked at teardown; :func:`finding_mark` reads a test's recorded
finding (and the claims it is about), :func:`finding_of` tells whether an exception is it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from chaos.errors import Intermittent
from chaos.plugin.items import engine_of
from chaos.plugin.results.item_labels import claims_of, labels_of
from chaos.report.claims import FINDING_ABOUT_LABEL, PARAMETER


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
    mark = finding_mark(item)
    for claim in mark.claims if mark is not None else ():
        allure.dynamic.label(FINDING_ABOUT_LABEL, claim)


def label_claims(claims: Sequence[str]) -> None:
    """Add ``claim`` labels to the running test: postconditions checked at teardown."""
    import allure

    for claim in claims:
        allure.dynamic.label("claim", claim)
        allure.dynamic.tag(claim)


@dataclass(frozen=True)
class FindingMark:
    """The xfail that records a test's finding, read from its markers."""

    #: The exception class(es) its ``raises=`` names (or a ``pytest.RaisesExc``).
    raises: Any
    #: The test's claims the finding is about: the ``claims`` of the exception classes
    #: (:class:`chaos.errors.Finding`) the test carries, else every claim of the test.
    claims: tuple[str, ...]

    def matches(self, error: BaseException) -> bool:
        if isinstance(error, pytest.xfail.Exception):
            return False
        if isinstance(self.raises, type | tuple):
            return isinstance(error, self.raises)
        return bool(getattr(self.raises, "matches", lambda e: False)(error))


def _classes(raises: Any) -> tuple[type, ...]:
    if isinstance(raises, type):
        return (raises,)
    if isinstance(raises, tuple):
        return tuple(c for c in raises if isinstance(c, type))
    found = getattr(raises, "expected_exceptions", None) or getattr(raises, "exception", None)
    return _classes(found) if found is not None else ()


def finding_mark(item: pytest.Item) -> FindingMark | None:
    """``item``'s recorded finding: the xfail that applies (the first whose conditions hold,
    pytest's rule) if it records one, else None.

    It records one when its reason starts with ``FINDING:``, it names the exception in
    ``raises=``, and it is strict — or non-strict with every class it names an
    :class:`~chaos.errors.Intermittent` (a race or a crash inside Ray goes either way run to
    run). An imperative ``pytest.xfail``, a skip, any other non-strict xfail, one without
    ``raises=``, or one with a string condition (not evaluated here) records nothing.
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
        classes = _classes(raises)
        intermittent = bool(classes) and all(issubclass(c, Intermittent) for c in classes)
        if raises is None or not reason.startswith("FINDING:") or not (strict or intermittent):
            return None
        claims = claims_of(item)
        about = sorted({c for k in classes for c in getattr(k, "claims", ()) if c in claims})
        return FindingMark(raises, tuple(about or claims))
    return None


def stray_finding_claims(item: pytest.Item) -> list[str]:
    """``Class: CLAIM`` for each claim a finding class of ``item``'s xfail markers names that
    ``item`` does not carry (a typo would silently make the finding about every claim)."""
    carried = set(claims_of(item))
    return [
        f"{cls.__name__}: {claim}"
        for mark in item.iter_markers("xfail")
        for cls in _classes(mark.kwargs.get("raises"))
        for claim in getattr(cls, "claims", ()) or ()
        if claim not in carried
    ]


def finding_of(item: pytest.Item, error: BaseException) -> str | None:
    """The class name of ``error`` when it is ``item``'s recorded finding
    (:func:`finding_mark`), else None."""
    mark = finding_mark(item)
    return type(error).__name__ if mark is not None and mark.matches(error) else None
