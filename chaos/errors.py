"""One exception root for everything raychaos raises (docker-py's shape).

A harness or Docker problem is a :class:`ChaosError` (Allure: *broken*); an outcome that
contradicts Ray's documentation is a :class:`CheckFailed`, a ``ChaosError`` that is also an
``AssertionError`` (Allure: *failed*); evidence too thin to judge is inconclusive
(:class:`FaultNotObserved`, :class:`ObserverGap`: *broken*). Verdicts are raised, never
``assert``-ed: ``python -O`` strips asserts, and a check must not pass by vanishing. Messages
say what was expected, what was seen and what to try.
"""

from __future__ import annotations

from typing import ClassVar


class ChaosError(Exception):
    """Root of every error raychaos raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} — {hint}" if hint else message)


class CheckFailed(ChaosError, AssertionError):
    """What was seen contradicts what a check expects: a verdict, not a harness problem.

    An ``AssertionError`` so pytest and Allure call it *failed*, a strict xfail's
    ``raises=AssertionError`` matches it, and bounded polls (``chaos.waits``, a fault's
    ``verify``) retry while it is raised.
    """


class Finding(CheckFailed):
    """Ray contradicted its docs on the claims in :attr:`claims`, and an experiment records it.

    Subclass it once per finding, naming the claim(s) it is about, and name the subclass in
    the experiment's ``xfail(strict=True, raises=…, reason="FINDING: …")``. Every other claim
    the same test judges keeps its own verdict (:func:`chaos.check.held`): a finding about
    CHURN-05 does not make CHURN-03 a finding. A finding class with no claims is about every
    claim of its test.
    """

    #: The claim ids this finding is about.
    claims: ClassVar[tuple[str, ...]] = ()


class Intermittent(Finding):
    """A finding that goes either way from run to run: a race inside Ray, or Ray crashing.

    The one kind of finding whose xfail may be non-strict (``strict=False``): the run whose
    race went Ray's documented way passes, the run that lost it raises this and is recorded
    as the finding, and over several runs the report says how often the claim held ("held in
    k of n"). Never a way to accept an outcome: the run that raised it did not verify the
    claim.
    """


class RaceLost(Intermittent):
    """Two paths inside Ray raced and the one the docs do not promise won (name the code
    path in the finding's reason)."""


class RayCrashed(Intermittent):
    """A Ray process died on an internal check (a ``RAY_CHECK``, a fatal log line) or without
    a word, where its docs promise an orderly outcome."""


class SpecError(ChaosError, ValueError):
    """A cluster or node spec is invalid; raised before any container starts."""

    def __init__(self, field: str, expected: str, seen: object, hint: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: expected {expected}, got {seen!r}", hint=hint)


class DockerUnavailable(ChaosError):
    """The Docker daemon cannot be reached."""


class DockerOperationError(ChaosError):
    """A Docker API call failed; carries the daemon's explanation."""


class ImageBuildError(ChaosError):
    """A Ray image could not be built (no wheels, no base image, failed install)."""


class ImageLacksTool(ChaosError):
    """A command raychaos runs in a node is not in its image (exit 127): the experiment must
    declare it with ``@pytest.mark.needs_tools`` so it skips on such images."""


class PythonPatchUnavailable(ChaosError):
    """No interpreter of another patch release is at hand to stage a Python patch skew."""


class ClusterBootTimeout(ChaosError):
    """Not every expected node became ALIVE in the GCS before the boot timeout."""


class HostTooBusy(ClusterBootTimeout):
    """A boot that did not finish while its nodes were stalled waiting for a CPU past
    :mod:`chaos.check.stalls`' threshold: inconclusive (too busy to boot), not broken."""

    def __init__(self, message: str, *, stall: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        #: The stall, as a reader sees it ("worker-1 stalled 12.1 s of the 15.0 s …").
        self.stall = stall


class WorkloadError(ChaosError):
    """A workload could not be started, or its process ended without a result."""


class WorkloadTimeout(WorkloadError):
    """A workload or a wait on its events ran past its bound."""


class FaultNotObserved(ChaosError):
    """A fault was injected but its effect could not be verified: the experiment is inconclusive."""


class ObserverGap(FaultNotObserved):
    """The observer did not see the whole window a check judges (no fresh sample, a gap
    between samples, or the observer gave up): the check is inconclusive, never passed."""


class MissingEvidence(FaultNotObserved):
    """A workload event or record the verdict needs never came: the experiment is
    inconclusive, and the message says what the workload did say."""


class HealError(ChaosError):
    """A fault could not be healed; the cluster is in an unknown state."""
