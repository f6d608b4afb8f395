"""Verdicts as pure functions over what a run recorded (Jepsen's checkers).

A verdict function takes what the run recorded — log lines, a workload's result, the times
of the strikes — and returns a :class:`Verdict` for one claim: *held* (with the evidence),
*failed* (with what was seen, and the :class:`~chaos.errors.Finding` class when the failure
is a recorded finding) or *unknown* (the record cannot decide: Jepsen's ``:valid?
:unknown``). It reads no Docker and no clock, so it is unit-tested on recorded data, the
failing and the undecidable cases included. Written with :func:`verdict`::

    @verdict("SERVE-01")
    def replica_crash(j: Judging, lines: list[dict], kill_at: float, bound: float) -> str:
        crashed = [x for x in lines if x["rule"] == "crashed"]
        j.require(len(crashed) == 1, f"one crash line, saw {crashed}")
        window = j.measure("kill → crash line (s)", crashed[0]["t"] - kill_at,
                           band=(0.0, bound), start=kill_at)
        j.require(window <= bound, f"the crash was seen {window} s after the kill")
        return f"seen {window} s after the kill"

    replica_crash(lines, kill_at, bound)    # a Verdict; no exception escapes
    experiment.judge(replica_crash(...))    # records it; raises unless it held

What it measured on the way is kept on the verdict whatever the outcome, so a failed
verdict's numbers reach the report (and its banded windows the host's stall check).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Literal, NoReturn, ParamSpec, TypeVar

from chaos.errors import CheckFailed, FaultNotObserved, Finding, MissingEvidence

P = ParamSpec("P")
T = TypeVar("T")
Outcome = Literal["held", "failed", "unknown"]


@dataclass(frozen=True)
class Measured:
    """One number a verdict measured: shown with the result, and drawn against its band."""

    name: str
    value: Any
    #: (low, high) seconds the value is held against, if any.
    band: tuple[float, float] | None = None
    #: When the band's window opens (wall clock), for the timeline.
    start: float | None = None
    #: When it closes: the moment measured (``start`` + the value), not when it was judged —
    #: the host's stall is judged over the window itself (:mod:`chaos.check.stalls`).
    end: float | None = None


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict over one run."""

    claim: str
    outcome: Outcome
    #: The evidence when it held; what was seen (and expected) when it did not.
    reason: str
    measured: tuple[Measured, ...] = ()
    #: For a failure that is a recorded finding: the class the experiment's xfail names.
    finding: type[Finding] | None = field(default=None, compare=False)

    @property
    def held(self) -> bool:
        return self.outcome == "held"

    def error(self) -> CheckFailed | MissingEvidence:
        """What a run raises for this verdict when it did not hold."""
        if self.outcome == "unknown":
            return MissingEvidence(f"{self.claim} cannot be judged: {self.reason}")
        return (self.finding or CheckFailed)(f"{self.claim}: {self.reason}")


class _Decided(Exception):
    def __init__(self, outcome: Outcome, reason: str, finding: type[Finding] | None) -> None:
        super().__init__(reason)
        self.outcome: Outcome = outcome
        self.reason = reason
        self.finding = finding


class Judging:
    """The working state of one verdict function: what it measured, and its early exits."""

    def __init__(self, claim: str) -> None:
        self.claim = claim
        self.measured: list[Measured] = []

    def measure(
        self,
        name: str,
        value: Any,
        *,
        band: tuple[float, float] | None = None,
        start: float | None = None,
    ) -> Any:
        """Keep ``value`` under ``name`` (returned); with ``band`` it is a judged window, from
        ``start`` to ``start`` + ``value`` (seconds)."""
        end = None
        if band is not None and start is not None and isinstance(value, int | float):
            end = start + float(value)
        self.measured.append(Measured(name, value, band, start, end))
        return value

    def require(self, holds: bool, seen: str, finding: type[Finding] | None = None) -> None:
        """Unless ``holds``, the claim failed: ``seen`` says what was seen against what was
        expected; ``finding``: the recorded finding this failure is."""
        if not holds:
            raise _Decided("failed", seen, finding)

    def fail(self, seen: str, finding: type[Finding] | None = None) -> NoReturn:
        """The claim failed: ``seen`` says how; ``finding``: the recorded finding it is."""
        raise _Decided("failed", seen, finding)

    def found(self, value: T | None, seen: str) -> T:
        """``value``; the claim failed (``seen``) when it is None (an outcome never seen)."""
        if value is None:
            raise _Decided("failed", seen, None)
        return value

    def unknown(self, why: str) -> NoReturn:
        """The record cannot decide the claim (evidence missing, never a timeout alone)."""
        raise _Decided("unknown", why, None)


def verdict(
    claim: str,
) -> Callable[[Callable[Concatenate[Judging, P], str]], Callable[P, Verdict]]:
    """Make ``fn(j, *args) -> evidence`` a verdict function ``(*args) -> Verdict`` for
    ``claim``: its :meth:`Judging.require` and :meth:`Judging.unknown` end it early, and so
    does a ``CheckFailed`` (a finding's class kept) or ``FaultNotObserved`` raised by a pure
    helper it calls (``chaos.testing.death_cause``…). Anything else is a bug and propagates."""

    def wrap(fn: Callable[Concatenate[Judging, P], str]) -> Callable[P, Verdict]:
        @functools.wraps(fn)
        def judged(*args: P.args, **kwargs: P.kwargs) -> Verdict:
            j = Judging(claim)
            try:
                evidence = fn(j, *args, **kwargs)
            except _Decided as decided:
                return Verdict(
                    claim, decided.outcome, decided.reason, tuple(j.measured), decided.finding
                )
            except CheckFailed as failed:  # a check helper's verdict (chaos.check), or a finding
                finding = type(failed) if isinstance(failed, Finding) else None
                return Verdict(claim, "failed", str(failed), tuple(j.measured), finding)
            except FaultNotObserved as thin:  # evidence a helper found missing
                return Verdict(claim, "unknown", str(thin), tuple(j.measured))
            return Verdict(claim, "held", evidence, tuple(j.measured))

        return judged

    return wrap


def rows_of(lines: Sequence[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    """The log rows a rule matched (``{"t", "rule", "groups", "line"}``, as the workloads'
    log readers give them), oldest first."""
    return [line for line in lines if line["rule"] == rule]
