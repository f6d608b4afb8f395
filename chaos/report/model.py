"""An Allure results directory, loaded: one :class:`TestResult` per test, the run-level files.

:func:`load_results` is the only I/O of the HTML report; everything else works on its output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from chaos.errors import ChaosError
from chaos.report.categories import FINDING_GONE, NOT_ABOUT_RAY, categorize
from chaos.report.claims import (
    FINDING_ABOUT_LABEL,
    FINDING_LABEL,
    INCONCLUSIVE_LABEL,
    PARAMETER,
    SCHEMA_LABEL,
)
from chaos.report.files import CONTAINER, RESULT, read_json, read_objects
from chaos.report.properties import parse_properties
from chaos.report.trials import trial_of_parameters

#: allure-pytest records an xfail as "skipped" with the message "XFAIL <reason>…" (how a
#: finding's message reads; whether it is one, only its label says: ``TestResult.finding``).
FINDING = re.compile(r"^(?:XFAIL )?FINDING:")
#: The message of a finding in results of a raychaos older than its finding labels: such a
#: result is not counted (its label would say which exception it raised), only listed.
OLD_FINDING = re.compile(r"^XFAIL FINDING:")
#: pytest's report of a strict xfail whose test passed (the test fails).
XPASS_STRICT = "[XPASS(strict)]"
#: The effective status of a strict xfail whose test passed: a recorded finding that no longer
#: reproduces. Never "failed": a fix in Ray must not read as a regression.
GONE = "finding gone"
#: The effective status of a body judged on a host too busy to judge it (its label names the
#: stall): neither passed nor failed.
INCONCLUSIVE = "inconclusive"
MEASUREMENTS = "measurements"
#: A claim's check in a fixture's teardown step title: ``check: INV-01 available CPU …``
#: (:mod:`chaos.experiment.kit` names the postconditions' steps so).
CHECK_STEP = re.compile(r"^check: ([A-Z]+-[0-9]+)\b")
#: A claim's verdict recorded in the body (:meth:`chaos.experiment.Experiment.held`):
#: ``verdict: CHURN-03 held — <evidence>``. A claim of a test that ends in a finding about
#: another claim, or in a failure, is passed only if its verdict step says it held.
VERDICT_STEP = re.compile(r"^verdict: ([A-Z][A-Z0-9]*-[0-9]+) held\b")


@dataclass(frozen=True)
class Attachment:
    name: str
    source: str
    type: str


@dataclass
class TestResult:
    """One test's Allure result (after retries are folded), with its fixtures' attachments."""

    __test__: ClassVar[bool] = False  # a result, not a pytest test class

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
    #: Which of ``--raychaos-trials`` runs this is (None: one trial per test).
    trial: int | None = None
    #: (claim id, step status) of each claim checked in a fixture's teardown (the
    #: postconditions): which checks ran, and how each ended.
    checks: tuple[tuple[str, str], ...] = ()
    #: Claims whose verdict the body recorded as held (a passed ``verdict:`` step).
    held: tuple[str, ...] = ()

    @property
    def finding(self) -> bool:
        """The body raised its recorded finding: the exception its xfail names in ``raises=``
        (the ``raychaos.finding`` label :mod:`chaos.plugin.allure` writes). Only the label
        counts: a message that reads ``XFAIL FINDING:`` without it (a result of a raychaos
        older than its labels, a non-strict xfail, an imperative one) is not a finding
        (:attr:`unlabelled_finding` lists it)."""
        return any(name == FINDING_LABEL for name, _ in self.labels)

    @property
    def unlabelled_finding(self) -> bool:
        """A skipped result whose message reads like a finding but carries no finding label:
        not counted, and ``raychaos coverage`` says so."""
        return (
            self.status == "skipped"
            and not self.finding
            and OLD_FINDING.match(self.message) is not None
        )

    @property
    def inconclusive(self) -> str | None:
        """The stall that made this result inconclusive (its ``raychaos.inconclusive``
        label), else None."""
        return next((v for n, v in self.labels if n == INCONCLUSIVE_LABEL), None)

    @property
    def finding_claims(self) -> tuple[str, ...]:
        """The claims this result's finding (raised or declared) is about: its
        ``raychaos.finding.claim`` labels, else (results of schema 2) every claim it carries."""
        about = tuple(sorted({v for n, v in self.labels if n == FINDING_ABOUT_LABEL}))
        return about or self.claims

    @property
    def schema(self) -> str | None:
        return next((v for n, v in self.labels if n == SCHEMA_LABEL), None)

    @property
    def effective_status(self) -> str:
        """``finding`` for a recorded finding (:attr:`finding`) that stayed one, ``finding
        gone`` for a strict xfail that passed, else the Allure status (harness failures:
        ``broken``). A finding whose teardown then failed is that failure, not a finding."""
        if self.strict_xpass:
            return GONE
        if self.inconclusive is not None:
            return INCONCLUSIVE
        if self.status == "skipped" and self.finding:
            # An older raychaos left such a result skipped when a postcondition then failed.
            failed = [status for _, status in self.checks if status != "passed"]
            return ("failed" if failed[0] == "failed" else "broken") if failed else "finding"
        if self.status == "failed" and self.category in NOT_ABOUT_RAY:
            # The fixtures turn ChaosError into pytest.fail (Allure: failed); on this page
            # "failed" means Ray contradicted its docs, so a harness failure shows as broken.
            return "broken"
        return self.status

    @property
    def category(self) -> str | None:
        """The Allure category, as Allure picks it from ``categories.json``.

        A strict xfail that passed with no message (allure-pytest's own shape, before
        raychaos gave it one) is filed where raychaos' message would file it.
        """
        if self.strict_xpass and not self.message:
            return FINDING_GONE
        return categorize(self.status, self.message)

    @property
    def strict_xpass(self) -> bool:
        """A strict xfail (a recorded FINDING) whose test passed: pytest fails it.

        pytest says ``[XPASS(strict)] <reason>``; allure-pytest writes such a test as
        failed with no status details at all, which no other failure does (an exception
        always leaves a message), so either shape counts.
        """
        return self.status == "failed" and (
            XPASS_STRICT in self.message or not (self.message or self.trace)
        )


@dataclass
class Results:
    directory: Path
    tests: list[TestResult]
    #: environment.properties as read.
    environment: dict[str, str]
    executor: dict[str, Any]
    #: Attachment bodies the page embeds (timelines, measurements), by source file name.
    blobs: dict[str, bytes]
    #: Files that could not be read, with why.
    problems: list[str]
    #: Every result before retries are folded (repeated trials of a test included).
    runs: list[TestResult] = field(default_factory=list)


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


def _checks(node: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(claim id, status) of the ``check: <claim>`` steps of a fixture, depth first."""
    found: list[tuple[str, str]] = []
    for step in node.get("steps") or []:
        matched = CHECK_STEP.match(str(step.get("name", "")))
        if matched:
            found.append((matched.group(1), str(step.get("status") or "unknown")))
        found += _checks(step)
    return found


def _held(node: Mapping[str, Any]) -> list[str]:
    """Claims with a passed ``verdict: <claim> held`` step in the body, depth first."""
    found: list[str] = []
    for step in node.get("steps") or []:
        matched = VERDICT_STEP.match(str(step.get("name", "")))
        if matched and step.get("status") == "passed":
            found.append(matched.group(1))
        found += _held(step)
    return found


def unquote(value: str) -> str:
    # allure.dynamic.parameter stores repr(value): "'2.60.0'".
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def ray_version_of(data: Mapping[str, Any]) -> str | None:
    """The Ray version a raychaos test ran against (its excluded parameter), else None.

    Excluded only: a repository's own parametrisation is not ours.
    """
    for param in data.get("parameters") or []:
        if isinstance(param, dict) and param.get("name") == PARAMETER and param.get("excluded"):
            return unquote(str(param.get("value", "")))
    return None


def result_from_json(data: Mapping[str, Any]) -> TestResult:
    details = data.get("statusDetails") or {}
    labels = tuple(
        (str(x.get("name", "")), str(x.get("value", ""))) for x in data.get("labels", [])
    )
    return TestResult(
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
        ray_version=ray_version_of(data) or "",
        labels=labels,
        attachments=_attachments(data),
        trial=trial_of_parameters(data.get("parameters") or []),
        held=tuple(sorted(set(_held(data)))),
    )


def fold_retries(tests: Iterable[TestResult]) -> list[TestResult]:
    """One result per historyId, the latest (Allure shows the others as retries)."""
    return _latest(tests, lambda t: (t.history_id, None))


def every_trial(tests: Iterable[TestResult]) -> list[TestResult]:
    """One result per historyId and ``--raychaos-trials`` trial, the latest (a rerun replaces
    its trial); without trials the same as :func:`fold_retries`."""
    return _latest(tests, lambda t: (t.history_id, t.trial))


def _latest(
    tests: Iterable[TestResult], key: Callable[[TestResult], tuple[str, int | None]]
) -> list[TestResult]:
    latest: dict[tuple[str, int | None], TestResult] = {}
    for test in tests:
        seen = latest.get(key(test))
        if seen is None or (test.stop, test.start) >= (seen.stop, seen.start):
            latest[key(test)] = test
    return sorted(latest.values(), key=lambda t: (t.full_name, t.ray_version, t.name))


def load_results(directory: Path) -> Results:
    """Read an Allure results directory; unreadable files are listed, never fatal."""
    if not directory.is_dir():
        raise ChaosError(
            f"expected a directory of Allure results, {directory} is not one",
            hint="run pytest with --alluredir=DIR first, then `raychaos report DIR`",
        )
    problems: list[str] = []
    tests = [result_from_json(d) for d in read_objects(directory, RESULT, problems)]
    by_uuid = {t.uuid: t for t in tests}
    # Fixture set-up/tear-down attachments (the experiment fixture's history, timeline and
    # measurements) live in container files, linked to tests by their uuid.
    for container in read_objects(directory, CONTAINER, problems):
        extra = [
            a
            for f in [*container.get("befores", []), *container.get("afters", [])]
            for a in _attachments(f)
        ]
        # Teardown steps say which postconditions were checked: a body that failed has none.
        checks = tuple(c for f in container.get("afters", []) for c in _checks(f))
        for child in container.get("children", []):
            if child in by_uuid:
                by_uuid[child].attachments += extra
                by_uuid[child].checks += checks
    folded = fold_retries(tests)
    blobs: dict[str, bytes] = {}
    # Pictures of the results shown; measurements of every run (trials are compared).
    wanted = [a for t in folded for a in t.attachments if a.type == "image/png"]
    wanted += [a for t in tests for a in t.attachments if a.name == MEASUREMENTS]
    for attachment in wanted:
        if attachment.source in blobs:
            continue
        try:
            blobs[attachment.source] = (directory / attachment.source).read_bytes()
        except OSError as exc:
            problems.append(f"attachment {attachment.source} ({attachment.name}): {exc}")
    environment: dict[str, str] = {}
    env_file = directory / "environment.properties"
    if env_file.is_file():
        environment = parse_properties(env_file.read_text(encoding="utf-8"))
    executor = (
        read_json(directory / "executor.json", problems)
        if (directory / "executor.json").is_file()
        else None
    )
    return Results(
        directory=directory,
        tests=folded,
        environment=environment,
        executor=executor if isinstance(executor, dict) else {},
        blobs=blobs,
        problems=problems,
        runs=tests,
    )
