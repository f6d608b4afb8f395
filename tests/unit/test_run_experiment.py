"""The experiment's verdicts without pytest's fixtures: ``with run_experiment(cluster) as kit``.

A stand-in cluster (its INV-01 agent answers from a list) and a stand-in observer (it has
sampled the whole window): no Docker, no Ray. The same heal, postconditions and evidence as
the ``experiment`` fixture, which only enters this context manager.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import chaos.observer.observer as observing
from chaos.errors import CheckFailed, ObserverGap
from chaos.experiment import POSTCONDITIONS, Callbacks, run_experiment
from chaos.history import Event, History, Kind, Source

NODE = "a" * 56


class FakeObserver:
    """Has sampled since a minute ago and goes on until a minute from now."""

    instances: list[FakeObserver] = []  # noqa: RUF012 - the test reads what was built

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.failure: str | None = None
        self.stopped = False
        self.nodes: dict[str, dict[str, Any]] = {NODE: {"state": "ALIVE"}}
        FakeObserver.instances.append(self)

    def start(self) -> FakeObserver:
        now = time.time()
        history = self.cluster.history
        history.record(Source.OBSERVER, Kind.OBSERVER_STARTED, t=now - 60, period=0.25)
        for t in range(int(now) - 60, int(now) + 60):
            history.record(Source.OBSERVER, Kind.SAMPLED, t=float(t))
        return self

    def wait_first_sample(self, timeout: float) -> bool:
        return True

    def latest_nodes(self) -> dict[str, dict[str, Any]]:
        return self.nodes

    def stop(self) -> None:
        self.stopped = True


class FakeNemesis:
    def __init__(self) -> None:
        self.healed = 0
        self.killed_node_ids: set[str] = set()

    def heal_all(self) -> None:
        self.healed += 1


class FakeCluster:
    """What the kit reads of a cluster; the INV-01 agent says ``settled``."""

    def __init__(self, settled: bool = True) -> None:
        self.history = History()
        self.spec = SimpleNamespace(boot_timeout_s=5.0)
        self.driver = SimpleNamespace(name="driver")
        self.settled = settled
        self.streams: list[list[str]] = []

    def ray_nodes(self) -> list[Any]:
        return [SimpleNamespace(node_id=NODE, past_node_ids=(), name="head", ip="10.0.0.2")]

    def node_by_id(self, node_id: str) -> Any:
        return self.ray_nodes()[0]

    def next_source(self, prefix: str) -> str:
        return f"{prefix}-1"

    def stream(self, node: str, argv: list[str], **_: Any) -> Any:
        self.streams.append(argv)
        verdict = Event(time.time(), "inv01-1", Kind.INV01, {"settled": self.settled})
        return SimpleNamespace(wait=lambda _: None, events=lambda: [verdict], tail=lambda _: "")

    def knobs(self) -> dict[str, Any]:
        return {}

    def node_map(self) -> dict[str, Any]:
        return {}


@pytest.fixture(autouse=True)
def fake_observer(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeObserver.instances.clear()
    monkeypatch.setattr(observing, "Observer", FakeObserver)


def test_a_passing_body_is_healed_checked_and_leaves_its_history(tmp_path: Path) -> None:
    cluster, nemesis = FakeCluster(), FakeNemesis()
    checked: list[Sequence[str]] = []
    with run_experiment(
        cluster,  # type: ignore[arg-type]
        nemesis=nemesis,  # type: ignore[arg-type]
        evidence_dir=tmp_path,
        test_id="script::kill-a-worker",
        callbacks=Callbacks(checking=checked.append),
    ) as kit:
        kit.measure("recovery_s", 3.5)
    assert nemesis.healed == 1
    assert [sorted(c) for c in checked] == [sorted(POSTCONDITIONS)]
    assert cluster.streams, "INV-01 ran its agent"
    assert FakeObserver.instances[0].stopped
    [history] = kit.evidence
    saved = json.loads(history.read_text())
    assert saved["test"] == "script::kill-a-worker"
    assert saved["measurements"] == {"recovery_s": 3.5}


def test_a_violated_postcondition_raises_from_the_with_statement(tmp_path: Path) -> None:
    cluster = FakeCluster()
    failures: list[BaseException] = []
    with (
        pytest.raises(CheckFailed, match=r"INV-02: nodes died .*head"),
        run_experiment(
            cluster,  # type: ignore[arg-type]
            evidence_dir=tmp_path,
            callbacks=Callbacks(teardown_failed=failures.append),
        ),
    ):
        FakeObserver.instances[0].nodes[NODE] = {"state": "DEAD", "state_message": "killed"}
    assert len(failures) == 1 and isinstance(failures[0], CheckFailed)
    assert list(tmp_path.glob("*.history.json")), "the evidence is written all the same"


def test_a_failed_body_is_healed_but_judges_no_postcondition(tmp_path: Path) -> None:
    cluster, nemesis = FakeCluster(settled=False), FakeNemesis()
    with (
        pytest.raises(RuntimeError, match="the workload broke"),
        run_experiment(cluster, nemesis=nemesis, evidence_dir=tmp_path),  # type: ignore[arg-type]
    ):
        raise RuntimeError("the workload broke")
    assert nemesis.healed == 1
    assert cluster.streams == [], "no INV-01 after a failed body"
    assert list(tmp_path.glob("*.history.json"))


def test_resources_that_do_not_settle_fail_inv01() -> None:
    with (
        pytest.raises(CheckFailed, match="INV-01: resources did not settle"),
        run_experiment(FakeCluster(settled=False), nemesis=FakeNemesis()),  # type: ignore[arg-type]
    ):
        pass


def test_an_interrupt_skips_heal_checks_and_evidence(tmp_path: Path) -> None:
    nemesis = FakeNemesis()
    with (
        pytest.raises(KeyboardInterrupt),
        run_experiment(FakeCluster(), nemesis=nemesis, evidence_dir=tmp_path),  # type: ignore[arg-type]
    ):
        raise KeyboardInterrupt
    assert nemesis.healed == 0
    assert not list(tmp_path.iterdir())


def test_an_observer_that_never_samples_is_an_observer_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Silent(FakeObserver):
        def wait_first_sample(self, timeout: float) -> bool:
            return False

    monkeypatch.setattr(observing, "Observer", Silent)
    with (
        pytest.raises(ObserverGap, match="never answered the observer"),
        run_experiment(FakeCluster()),  # type: ignore[arg-type]
    ):
        pytest.fail("the body must not run")
    assert FakeObserver.instances[-1].stopped
