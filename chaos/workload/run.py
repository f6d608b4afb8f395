"""Workloads: Ray code that runs inside the cluster, with the cluster's own Ray and Python.

A workload is ``module:function`` from a package shipped into every node (``experiments/
workloads`` or a user's own). It reports through ``raychaos_agent.emit``; its events reach the
history live, so a test can wait for "tasks running" before it strikes. It ends with a result
or a typed error, and never outlives its bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import MissingEvidence, WorkloadError, WorkloadTimeout
from chaos.history import Event, History, Kind
from chaos.steps import mark, seconds, short, step

if TYPE_CHECKING:
    from chaos.backends.base import Stream


@dataclass(frozen=True)
class RemoteError:
    """An exception raised inside the cluster, as data: enough to assert on its type."""

    type: str
    bases: tuple[str, ...]
    module: str
    message: str
    attrs: dict[str, Any] = field(default_factory=dict)
    cause: RemoteError | None = None
    traceback: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemoteError:
        cause = data.get("cause")
        return cls(
            type=str(data.get("type", "")),
            bases=tuple(data.get("bases", ())),
            module=str(data.get("module", "")),
            message=str(data.get("message", "")),
            attrs=dict(data.get("attrs") or {}),
            cause=cls.from_json(cause) if isinstance(cause, dict) else None,
            traceback=str(data.get("traceback", "")),
        )

    def isinstance(self, name: str) -> bool:
        """True when the remote exception is a ``name`` (its class or any base class)."""
        return name == self.type or name in self.bases

    def __str__(self) -> str:
        return f"{self.type}: {self.message.splitlines()[0] if self.message else ''}"


class WorkloadRaised(AssertionError):
    """The workload's function raised where the experiment expected a value.

    An ``AssertionError``: what Ray did inside the workload is the outcome under test.
    """

    def __init__(self, target: str, error: RemoteError) -> None:
        self.error = error
        super().__init__(f"workload {target} raised {error}\n{error.traceback[-2000:]}")


@dataclass(frozen=True)
class WorkloadOutcome:
    """How a workload ended: a value, or the error its function raised."""

    value: Any = None
    error: RemoteError | None = None
    #: Wall-clock time the outcome was reported inside the cluster.
    t: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


class WorkloadRun:
    """A running workload: its events, its outcome, and a way to stop it."""

    def __init__(self, target: str, stream: Stream, history: History, timeout: float) -> None:
        self.target = target
        self.stream = stream
        self.history = history
        self.timeout = timeout
        self.source = stream.source
        mark(f"workload: start {self._described()} (≤ {seconds(timeout)})")

    def events(self, kind: str | None = None) -> list[Event]:
        return self.history.events(kind=kind, source=self.source)

    def last(self, kind: str) -> Event:
        """The latest ``kind`` event; :class:`~chaos.errors.MissingEvidence` (inconclusive)
        naming what the workload did report when there is none."""
        found = self.events(kind)
        if found:
            return found[-1]
        said = Counter(str(e.kind) for e in self.events())
        raise MissingEvidence(
            f"workload {self.target} reported no '{kind}' event ({self._ending()}); it "
            f"reported: {dict(said) or 'nothing'}",
            hint=f"the verdict needs it; last output: {self.stream.tail(10)}",
        )

    def wait_for(
        self,
        kind: str,
        count: int = 1,
        *,
        timeout: float,
        where: Callable[[Event], bool] | None = None,
    ) -> list[Event]:
        """The first ``count`` events of ``kind``; raises :class:`WorkloadTimeout` past ``timeout``.

        Fails fast when the workload ends first, showing its outcome.
        """
        what = f"{count} × '{kind}'" if count > 1 else f"'{kind}'"
        with step(f"wait: {what} from {self.target} ≤ {seconds(timeout)}"):
            return self._wait_for(kind, count, timeout, where)

    def _wait_for(
        self, kind: str, count: int, timeout: float, where: Callable[[Event], bool] | None
    ) -> list[Event]:
        try:
            return self.history.wait_for(
                lambda e: (
                    e.source == self.source and e.kind == kind and (where is None or where(e))
                ),
                count=count,
                timeout=timeout,
                what=f"'{kind}' from {self.target}",
                done=lambda: not self.stream.running,
            )
        except WorkloadTimeout as exc:
            ended = self._ending()
            raise WorkloadTimeout(
                exc.message, hint=f"{ended}; {exc.hint}; output: {self.stream.tail(5)}"
            ) from None

    def outcome(self, timeout: float | None = None) -> WorkloadOutcome:
        """Wait for the workload to end (at most ``timeout``, default its bound) and return how."""
        bound = self.timeout if timeout is None else timeout
        with step(f"wait: workload {self.target} ends ≤ {seconds(bound)}"):
            return self._outcome(bound)

    def _outcome(self, bound: float) -> WorkloadOutcome:
        if not self.stream.wait(bound):
            self.stream.stop()
            raise WorkloadTimeout(
                f"workload {self.target} still running after {bound:.0f} s",
                hint=f"it was stopped; last output: {self.stream.tail(10)}",
            )
        for event in reversed(self.events()):
            if event.kind == Kind.RESULT:
                return WorkloadOutcome(value=event.get("value"), t=event.t)
            if event.kind == Kind.ERROR:
                return WorkloadOutcome(
                    error=RemoteError.from_json(event.get("error") or {}), t=event.t
                )
            if event.kind == Kind.HARNESS_ERROR:
                raise WorkloadError(
                    f"workload {self.target} could not be started: {event.get('message')}",
                    hint="check the module path and the keyword arguments",
                )
        raise WorkloadError(
            f"workload {self.target} ended without a result ({self._ending()})",
            hint=f"its node may have died; last output: {self.stream.tail(10)}",
        )

    def result(self, timeout: float | None = None) -> Any:
        """The function's return value; :class:`WorkloadRaised` if it raised."""
        outcome = self.outcome(timeout)
        if outcome.error is not None:
            with step(f"workload {self.target} raised {short(str(outcome.error), 120)}"):
                raise WorkloadRaised(self.target, outcome.error)
        return outcome.value

    def stop(self) -> None:
        self.stream.stop()

    def _described(self) -> str:
        """``target on node (k=v, …)`` from the history's ``workload_start`` event."""
        start = next(
            (e for e in self.history.events(Kind.WORKLOAD_START) if e.get("run") == self.source),
            None,
        )
        if start is None:
            return self.target
        args = start.get("kwargs")
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict) else ""
        return short(f"{self.target} on {start.get('node')}" + (f" ({shown})" if shown else ""))

    def _ending(self) -> str:
        if self.stream.running:
            return "still running"
        return f"exit code {self.stream.exit_code}"
