"""One experiment's kit: cluster, nemesis, observer, history — and the postconditions.

After every experiment (claims INV-01 and INV-02): faults are healed, no node died that the
experiment did not take down (judged on a fresh sample of an observer that saw the experiment
whole), and once work is done available CPU returns to total with no placement-group resources
left. The kit also writes its history as JSON; the report draws the timeline from it.
:func:`chaos.experiment.run.run_experiment` runs those steps around a body.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.check.bands import node_death_band
from chaos.check.stalls import Stall, judged_windows, longest_silence, material, worst_in
from chaos.check.verdicts import Verdict
from chaos.cluster.autoscaler import launches
from chaos.cluster.readiness import judging_priority
from chaos.cluster.stalls import StallSampler
from chaos.errors import ChaosError, CheckFailed, ObserverGap
from chaos.history import Kind, Source
from chaos.nemesis.nemesis import Nemesis
from chaos.observer.gaps import observed, samples
from chaos.observer.observer import Observer
from chaos.steps import seconds, short, step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster
    from chaos.history import History

#: INV-01 (the catalogue): tasks settle within 60 s, actors within 300 s. One bound is checked,
#: the tasks' 60 s, for everything: it is the stricter, and every experiment's actors have
#: settled by teardown (INV-01 held in every suite run).
INV01_TASKS_S = 60.0
#: Seconds between checkpoints of the history while the body runs (a crashed worker's result
#: carries the last one): a JSON dump of a few thousand events, tens of milliseconds.
CHECKPOINT_S = 15.0
#: How the State API reports a node the autoscaler drained and shut down (its raylet's
#: ``NodeManager::HandleDrainRaylet``: ``EXPECTED_TERMINATION``, "Terminated by autoscaler.",
#: node_manager.cc): a launched node's idle removal, the autoscaler's own doing, not an
#: unexpected death for INV-02 (the harness retires its container once the provider's wish
#: drops it, a round later; a check in between saw it DEAD: the -n 4 night of 7 December 2026).
AUTOSCALER_TERMINATION = "Expected termination: Terminated by autoscaler."
#: The claims every experiment verifies after its body: resources settle, no unexpected death.
POSTCONDITIONS = ("INV-01", "INV-02")


@dataclass
class Experiment:
    cluster: Cluster
    nemesis: Nemesis
    observer: Observer
    #: Numbers worth reporting (recovery windows, attempts), shown with the result.
    measurements: dict[str, Any] = field(default_factory=dict)
    #: Why a postcondition does not apply (e.g. the head is gone for good), by claim id.
    waived: dict[str, str] = field(default_factory=dict)
    inv01_timeout: float = INV01_TASKS_S
    #: What :func:`chaos.experiment.run.run_experiment` wrote at exit (history JSON, timeline).
    evidence: list[Path] = field(default_factory=list)
    #: When the body began (the observer had its first sample), wall clock.
    body_started: float | None = None
    #: Samples every node's CPU stall into the history while the body runs.
    stall_sampler: StallSampler | None = None

    @property
    def ray_version(self) -> str:
        """The Ray release of the cluster under test."""
        return self.cluster.spec.ray_version

    @property
    def history(self) -> History:
        return self.cluster.history

    def measure(
        self,
        name: str,
        value: Any,
        *,
        band: Any = None,
        start: float | None = None,
        end: float | None = None,
    ) -> Any:
        """Record ``value`` under ``name``; returns ``value``.

        ``band``: the interval (a :class:`~chaos.check.bands.Band` or ``(low, high)``, seconds)
        the value is held against, drawn on the timeline from ``start`` (the wall-clock time
        the window opens; default: the latest strike's) to ``end`` (when the moment measured
        came; default: now, when it is measured as it happens).
        """
        self.measurements[name] = value
        fields: dict[str, Any] = {"name": name, "value": value}
        if band is not None:
            low, high = (band.low, band.high) if hasattr(band, "low") else band
            fields["band"] = [float(low), float(high)]
            if start is None:
                strikes = self.history.events(Kind.INJECT, source=Source.NEMESIS)
                start = strikes[-1].t if strikes else None
            fields["start"] = start
            if end is not None:
                fields["end"] = end
        self.history.record(Source.CHECKER, Kind.MEASUREMENT, **fields)
        return value

    def start_judging(self, checkpoint: Callable[[], object] | None = None) -> None:
        """The body begins: its windows are judged from now, with the nodes' stalls sampled.
        ``checkpoint`` (e.g. writing the history so far) runs every
        :data:`CHECKPOINT_S`: what a crashed xdist worker's result carries."""
        self.body_started = time.time()
        with contextlib.suppress(Exception):  # a weight is best effort
            judging_priority(self.cluster, judged=True)
        self.stall_sampler = StallSampler(
            self.cluster, every=(CHECKPOINT_S, checkpoint) if checkpoint else None
        ).start()

    def stop_judging(self) -> None:
        if self.stall_sampler is not None:
            self.stall_sampler.stop()
        with contextlib.suppress(Exception):  # a weight is best effort; teardown goes on
            judging_priority(self.cluster, judged=False)

    def too_busy(self, failed: bool) -> Stall | None:
        """The stall that makes the body's verdict inconclusive (:mod:`chaos.check.stalls`):
        over the windows it judged against a band and, when it ``failed``, the stretch from
        its last strike to the failure. Takes one last reading first; the worst node's
        stretch is recorded in the measurements either way, and an inconclusive one in the
        history."""
        if self.stall_sampler is not None:
            self.stall_sampler.sample()
        began = self.body_started or time.time()
        events = self.history.events()
        windows = judged_windows(events, began, time.time(), failed=failed)
        found = worst_in(events, windows)
        if found is not None:
            self.measure("host: worst CPU stall in the judged windows", found.to_json())
        # Beside the stall, the watchers' longest silences in the same windows: the host's
        # sampler (the harness starved) and the cluster's observer (the driver node starved).
        beats = {
            "stall sampler": sorted({e.t for e in events if e.kind == Kind.CPU_STALL}),
            "observer": [e.t for e in events if e.kind == Kind.SAMPLED],
        }
        silences = [longest_silence(w, t, windows) for w, t in beats.items()]
        if heard := [s.to_json() for s in silences if s is not None]:
            self.measure("host: longest heartbeat gap in the judged windows", heard)
        if found is None or not material(found):
            return None
        self.history.record(Source.HARNESS, Kind.INCONCLUSIVE, stall=found.to_json())
        return found

    def held(self, claim: str, evidence: str) -> None:
        """Record that ``claim`` held in this run, once every assertion about it has passed.

        A test that judges several claims calls it for each as soon as that claim is decided,
        so a finding or a failure about another claim later in the body leaves this one
        passed (per-claim verdicts: :func:`chaos.report.coverage.verdict_for`); a claim the
        body never recorded held is *not judged* by a run that ends in another claim's
        finding. The verdict is an Allure step (``verdict: CHURN-03 held — …``), a
        measurement and an event of the history.
        """
        if not re.fullmatch(r"[A-Z][A-Z0-9]*-[0-9]+", claim):
            raise ChaosError(
                f"held(): expected a claim id such as 'CHURN-03', got {claim!r}",
                hint="pass the id the test's @pytest.mark.claim names",
            )
        self.measure(f"verdict {claim}", f"held: {evidence}")
        with step(f"verdict: {claim} held — {short(evidence, 200)}"):
            pass

    def judge(self, verdict: Verdict) -> str:
        """Record ``verdict`` (:mod:`chaos.check.verdicts`): what it measured, then its claim
        held (:meth:`held`), returning the evidence; raise its error unless it held — its
        finding, ``CheckFailed``, or ``MissingEvidence`` when the record could not decide."""
        for m in verdict.measured:
            self.measure(m.name, m.value, band=m.band, start=m.start, end=m.end)
        if not verdict.held:
            raise verdict.error()
        self.held(verdict.claim, verdict.reason)
        return verdict.reason

    def waive(self, claim: str, reason: str) -> None:
        self.waived[claim] = reason

    def expect_death(self, node: str) -> None:
        """A node this experiment's fault kills indirectly (e.g. raylets exiting without GCS)."""
        node_id = self.cluster.node(node).node_id
        if node_id:
            self.nemesis.killed_node_ids.add(node_id)

    def node_death_band(self) -> Any:
        return node_death_band(self.cluster.knobs())

    # -- postconditions ---------------------------------------------------------------------
    def check_no_unexpected_death(self) -> None:
        """INV-02: every node that is DEAD was taken down by this experiment."""
        if "INV-02" in self.waived:
            return
        with step("check: INV-02 no node died that the experiment did not take down"):
            self._check_no_unexpected_death()

    def _check_no_unexpected_death(self) -> None:
        # The observer records transitions only: its latest states are the GCS's only if it
        # sampled after this check began and saw the experiment without a gap. An outage it
        # reported (GCS or head down) is no gap here: the GCS keeps dead nodes in its table,
        # so a node that died then is DEAD in the fresh sample. A death it saw fails the
        # check whatever else; without one, a gap leaves it inconclusive.
        self._no_unexpected_death()
        sampled = samples(self.history)
        if not sampled:
            raise ObserverGap("INV-02: the observer never sampled the State API")
        try:
            observed(self.history, sampled[0], "INV-02", outages_ok=True)
        except ObserverGap:
            self._no_unexpected_death()
            raise
        self._no_unexpected_death()

    def _no_unexpected_death(self) -> None:
        ours = {n.node_id for n in self.cluster.ray_nodes()} | {
            i for n in self.cluster.ray_nodes() for i in n.past_node_ids
        }
        dead = {
            node_id: state
            for node_id, state in self.observer.latest_nodes().items()
            if state.get("state") == "DEAD" and node_id in ours
        }
        launched = {str(e.get("node")) for e in launches(self.cluster)}
        unexpected = {
            k: v
            for k, v in dead.items()
            if k not in self.nemesis.killed_node_ids
            and not (
                self.cluster.node_by_id(k).name in launched
                and v.get("state_message") == AUTOSCALER_TERMINATION
            )
        }
        if unexpected:
            raise CheckFailed(
                "INV-02: nodes died that the experiment did not kill: "
                + ", ".join(
                    f"{self.cluster.node_by_id(k).name} ({v.get('state_message')})"
                    for k, v in unexpected.items()
                )
            )

    def check_resources_settle(self) -> None:
        """INV-01: available CPU back to total, no placement-group resources lingering."""
        if "INV-01" in self.waived:
            return
        with step(
            "check: INV-01 available CPU back to total, no placement-group resources "
            f"≤ {seconds(self.inv01_timeout)}"
        ):
            self._check_resources_settle()

    def _check_resources_settle(self) -> None:
        stream = self.cluster.stream(
            self.cluster.driver.name,
            ["python", "-u", "-m", "raychaos_agent.invariants", str(self.inv01_timeout)],
            source=self.cluster.next_source("inv01"),
            bound_s=self.inv01_timeout + 60,
        )
        stream.wait(self.inv01_timeout + 70)
        seen = [e for e in stream.events() if e.kind == Kind.INV01]
        if not seen:
            raise ChaosError(f"INV-01 check ended without a verdict: {stream.tail(8)}")
        verdict = seen[-1]
        if not verdict.get("settled"):
            raise CheckFailed(
                f"INV-01: resources did not settle within {self.inv01_timeout:.0f} s: "
                f"CPU {verdict.get('cpu_available')}/{verdict.get('cpu_total')} available, "
                f"placement-group resources {verdict.get('placement_group_resources')}"
            )

    # -- evidence ---------------------------------------------------------------------------
    def write_history(self, directory: Path, test_id: str) -> Path:
        """The history, knobs, nodes and measurements as ``<test>.history.json`` (written
        whole and renamed into place: a reader never sees half a file)."""
        directory.mkdir(parents=True, exist_ok=True)
        path = history_path(directory, test_id)
        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        partial.write_text(
            json.dumps(
                {
                    "test": test_id,
                    "knobs": self.cluster.knobs(),
                    "nodes": self.cluster.node_map(),
                    "measurements": self.measurements,
                    "events": self.history.to_json(),
                },
                indent=1,
                default=repr,
            )
        )
        partial.replace(path)
        return path


def history_path(directory: Path, test_id: str) -> Path:
    """Where the history of test ``test_id`` is written under ``directory``."""
    return directory / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test_id)[-150:]}.history.json"
