"""One exception root for everything raychaos raises (docker-py's shape).

A harness or Docker problem is a :class:`ChaosError` (Allure: *broken*); an outcome that
contradicts Ray's documentation is a :class:`CheckFailed`, a ``ChaosError`` that is also an
``AssertionError`` (Allure: *failed*); evidence too thin to judge is inconclusive
(:class:`FaultNotObserved`, :class:`ObserverGap`: *broken*). Verdicts are raised, never
``assert``-ed: ``python -O`` strips asserts, and a check must not pass by vanishing. Messages
say what was expected, what was seen and what to try.
"""

from __future__ import annotations


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


class WorkloadError(ChaosError):
    """A workload could not be started, or its process ended without a result."""


class WorkloadTimeout(WorkloadError):
    """A workload or a wait on its events ran past its bound."""


class FaultNotObserved(ChaosError):
    """A fault was injected but its effect could not be verified: the experiment is inconclusive."""


class ObserverGap(FaultNotObserved):
    """The observer did not see the whole window a check judges (no fresh sample, a gap
    between samples, or the observer gave up): the check is inconclusive, never passed."""


class HealError(ChaosError):
    """A fault could not be healed; the cluster is in an unknown state."""
