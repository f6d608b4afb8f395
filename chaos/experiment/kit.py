"""One experiment's kit: cluster, nemesis, observer, history — and the postconditions.

After every experiment (claims INV-01 and INV-02): faults are healed, no node died that the
experiment did not take down (judged on a fresh sample of an observer that saw the experiment
whole), and once work is done available CPU returns to total with no placement-group resources
left. The kit also writes its history as JSON; the report draws the timeline from it.
:func:`chaos.experiment.run.run_experiment` runs those steps around a body.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.check.bands import node_death_band
from chaos.errors import ChaosError, CheckFailed, ObserverGap
from chaos.history import Kind, Source
from chaos.nemesis.nemesis import Nemesis
from chaos.observer.gaps import observed, samples
from chaos.observer.observer import Observer
from chaos.steps import seconds, step

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster
    from chaos.history import History

#: INV-01 (the catalogue): tasks settle within 60 s, actors within 300 s. One bound is checked,
#: the tasks' 60 s, for everything: it is the stricter, and every experiment's actors have
#: settled by teardown (INV-01 held in every suite run).
INV01_TASKS_S = 60.0
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

    @property
    def ray_version(self) -> str:
        """The Ray release of the cluster under test."""
        return self.cluster.spec.ray_version

    @property
    def history(self) -> History:
        return self.cluster.history

    def measure(
        self, name: str, value: Any, *, band: Any = None, start: float | None = None
    ) -> Any:
        """Record ``value`` under ``name``; returns ``value``.

        ``band``: the interval (a :class:`~chaos.check.bands.Band` or ``(low, high)``, seconds)
        the value is held against, drawn on the timeline from ``start`` (the wall-clock time
        the window opens; default: the latest strike's).
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
        self.history.record(Source.CHECKER, Kind.MEASUREMENT, **fields)
        return value

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
        unexpected = {k: v for k, v in dead.items() if k not in self.nemesis.killed_node_ids}
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
        """The history, knobs, nodes and measurements as ``<test>.history.json``."""
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id)[-150:]
        directory.mkdir(parents=True, exist_ok=True)
        history_path = directory / f"{stem}.history.json"
        history_path.write_text(
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
        return history_path
