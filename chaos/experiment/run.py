"""An experiment as a context manager: the verdicts every experiment ends with, outside pytest.

``with run_experiment(cluster) as kit:`` starts an observer on a ready cluster and waits for
its first State API sample; the body injects faults through ``kit.nemesis``. On leaving, the
faults are healed, INV-01 and INV-02 are checked (not after a failed body), the observer stops
and the evidence is written. A violated postcondition raises from the ``with`` statement, so a
script or another framework gets the verdicts the pytest ``experiment`` fixture gets: the
fixture only enters this, steering it through :class:`Callbacks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import chaos.observer.observer as observing
from chaos import console
from chaos.errors import ObserverGap
from chaos.experiment.kit import POSTCONDITIONS, Experiment
from chaos.nemesis.nemesis import Nemesis
from chaos.steps import seconds, step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: Writes a kit's evidence into a directory under a test id: the history JSON and the timeline
#: picture (None: none drawn). :func:`chaos.report.timeline.write_evidence` draws one too.
EvidenceWriter = Callable[[Experiment, Path, str], tuple[Path, Path | None]]


def history_only(kit: Experiment, directory: Path, test_id: str) -> tuple[Path, Path | None]:
    """The default evidence: the history JSON alone (drawing it is the report's job)."""
    return kit.write_history(directory, test_id), None


def _never() -> bool:
    return False


def _ignore(_: object) -> None:
    return None


_stderr = console.write


@dataclass(frozen=True)
class Callbacks:
    """How a framework around the experiment steers its exit (every one optional).

    A ``with`` statement sees the body's exception itself; a framework whose body runs
    elsewhere (a pytest fixture) reports it through ``failed`` and ``abandoned`` instead.
    """

    #: True: the run is being interrupted or its engine is gone: no heal, checks or evidence
    #: (the cluster goes anyway); the observer stops in the background.
    abandoned: Callable[[], bool] = _never
    #: True: the body failed: heal and write evidence, check no postcondition.
    failed: Callable[[], bool] = _never
    #: Called with the postconditions about to be checked (a report labels the test with them).
    checking: Callable[[Sequence[str]], None] = _ignore
    #: Called when a heal or a postcondition failed, before its error propagates.
    teardown_failed: Callable[[BaseException], None] = _ignore
    #: Where a best-effort step that failed (the evidence) says so.
    say: Callable[[str], None] = _stderr


@contextmanager
def run_experiment(
    cluster: Cluster,
    *,
    nemesis: Nemesis | None = None,
    evidence_dir: Path | None = None,
    test_id: str = "experiment",
    write_evidence: EvidenceWriter = history_only,
    callbacks: Callbacks | None = None,
) -> Iterator[Experiment]:
    """The kit of an experiment on the ready ``cluster``, judged when the block ends.

    ``nemesis``: the faults' owner (default: a new one on ``cluster``). ``evidence_dir``: where
    ``write_evidence`` puts the evidence under ``test_id`` (None: nowhere). Raises
    :class:`~chaos.errors.ObserverGap` when the State API never answers the observer.
    """
    hooks = callbacks or Callbacks()
    observer = observing.Observer(cluster).start()
    kit = Experiment(cluster, nemesis or Nemesis(cluster), observer)
    # Readiness does not wait for the dashboard; the observer (State API) needs it.
    bound = cluster.spec.boot_timeout_s
    with step(f"wait: the observer's first State API sample (dashboard up) ≤ {seconds(bound)}"):
        if not observer.wait_first_sample(bound):
            observer.stop()
            why = f": it gave up: {observer.failure}" if observer.failure else ""
            raise ObserverGap(f"the State API (dashboard) never answered the observer{why}")
    kit.start_judging(
        None if evidence_dir is None else lambda: kit.write_history(evidence_dir, test_id)
    )
    abandoned = False
    try:
        try:
            yield kit
        except BaseException as exc:
            abandoned = isinstance(exc, KeyboardInterrupt) or hooks.abandoned()
            if not abandoned:
                _finish(kit, hooks, check=False)
            raise
        abandoned = hooks.abandoned()
        if not abandoned:
            _finish(kit, hooks, check=not hooks.failed())
    finally:
        kit.stop_judging()
        if abandoned:
            # Stopping the observer's stream takes seconds; removing the cluster ends it too.
            threading.Thread(target=observer.stop, name="observer-stop", daemon=True).start()
        else:
            observer.stop()
            if evidence_dir is not None:
                _write(kit, write_evidence, evidence_dir, test_id, hooks)


def _finish(kit: Experiment, hooks: Callbacks, *, check: bool) -> None:
    """Heal every fault; then, when ``check``, the postconditions the kit did not waive."""
    try:
        kit.nemesis.heal_all()
        if check:
            # Announced before the checks: a violated postcondition shows under its claim.
            hooks.checking([c for c in POSTCONDITIONS if c not in kit.waived])
            kit.check_no_unexpected_death()
            kit.check_resources_settle()
    except BaseException as exc:
        hooks.teardown_failed(exc)
        raise


def _write(
    kit: Experiment, writer: EvidenceWriter, directory: Path, test_id: str, hooks: Callbacks
) -> None:
    """The final history (heals and postconditions included); never breaks the run."""
    try:
        history, picture = writer(kit, directory, test_id)
        kit.evidence[:] = [history] if picture is None else [history, picture]
    except Exception as exc:  # noqa: BLE001 - evidence is best effort, the verdict is not
        hooks.say(f"raychaos: could not write evidence for {test_id}: {exc!r}")
