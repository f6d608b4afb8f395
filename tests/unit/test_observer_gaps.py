"""Checks that read the observer judge only what it saw: a gap or a dead observer is
inconclusive (ObserverGap, Allure: broken), never passed.

Issue 24: INV-02 and ``stays_dead`` judged the observer's last recorded states without
asking whether they were fresh or whether the window had a gap, and the observer's
supervisor retried forever, swallowing every error.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from chaos.check import stays_dead
from chaos.errors import ChaosError, CheckFailed, ObserverGap
from chaos.experiment import Experiment
from chaos.history import Event, History, Kind, Source
from chaos.observer.gaps import Sampling, gaps, observed
from chaos.observer.observer import Observer

VICTIM = "a" * 56
OTHER = "b" * 56


def started(history: History, t: float, **sampling: float) -> None:
    fields: dict[str, float] = {"period": 0.25, **sampling}
    history.record(Source.OBSERVER, Kind.OBSERVER_STARTED, t=t, **fields)


def sampled(history: History, start: float, end: float, every: float = 1.0) -> None:
    t = start
    while t <= end:
        history.record(Source.OBSERVER, Kind.SAMPLED, t=t)
        t += every


def node(history: History, t: float, node_id: str, state: str) -> None:
    history.record(Source.OBSERVER, Kind.NODE_STATE, t=t, node_id=node_id, state=state)


def kit(history: History, killed: set[str] | None = None) -> Experiment:
    """An experiment over ``history`` whose cluster has the nodes VICTIM and OTHER."""
    nodes = {
        i: SimpleNamespace(node_id=i, past_node_ids=(), name=f"node-{i[0]}")
        for i in (VICTIM, OTHER)
    }
    cluster: Any = SimpleNamespace(
        history=history,
        spec=SimpleNamespace(boot_timeout_s=1),
        ray_nodes=lambda: list(nodes.values()),
        node_by_id=nodes.get,
    )
    nemesis: Any = SimpleNamespace(killed_node_ids=killed or set())
    return Experiment(cluster, nemesis, Observer(cluster))


# -- what a gap is ------------------------------------------------------------------------------
def test_the_bound_derives_from_the_sampling_in_effect() -> None:
    """A heartbeat every two periods; two of them may be as far apart as a heartbeat, a
    sample whose every query took its whole timeout, and one period."""
    every = Sampling.every(0.5)
    assert every.heartbeat_s == 1.0
    assert every.max_gap_s == pytest.approx(1.0 + 3 * 5.0 + 0.5)
    history = History()
    assert Sampling.of(history) is None
    started(history, 1.0, period=0.5, heartbeat=2.0, queries=1, query_timeout=2)
    assert Sampling.of(history) == Sampling(0.5, 2.0, 1, 2.0)
    assert Sampling.of(history).max_gap_s == pytest.approx(4.5)  # type: ignore[union-attr]


def test_gaps_are_stretches_without_a_sample_and_say_who_was_silent() -> None:
    history = History()
    started(history, 0.0)
    sampled(history, 0.0, 10.0)
    history.record(Source.OBSERVER, Kind.UNOBSERVABLE, t=10.5)  # the GCS went down
    sampled(history, 40.0, 50.0)
    history.record(Source.OBSERVER, Kind.EXEC_ENDED, t=51.0)  # the agent died
    sampled(history, 80.0, 90.0)
    found = gaps(history, 0.0, 90.0, bound=16.25)
    assert [(g.start, g.end, g.reported) for g in found] == [
        (10.0, 40.0, True),
        (50.0, 80.0, False),
    ]
    assert "30.0 s without a sample" in str(found[0]) and "did not answer" in str(found[0])
    assert "the observer was silent" in str(found[1])
    # The window's edges count: it must open and close near a sample.
    assert [(g.start, g.end) for g in gaps(history, 0.0, 120.0, bound=16.25)][-1] == (90.0, 120.0)


# -- stays_dead ---------------------------------------------------------------------------------
def test_a_silent_gap_makes_stays_dead_inconclusive() -> None:
    history = History()
    started(history, 99.0)
    sampled(history, 99.0, 105.0)
    node(history, 104.0, VICTIM, "DEAD")
    sampled(history, 140.0, 150.0)  # 35 s in which the node could have come back unseen
    stays = cast(Any, SimpleNamespace(history=history))
    with pytest.raises(ObserverGap, match=r"cut: the observer did not see .* 35.0 s without"):
        stays_dead(stays, VICTIM, since_t=100.0, label="cut", until=149.0)


def test_an_outage_the_observer_reported_is_a_gap_for_stays_dead_too() -> None:
    history = History()
    started(history, 99.0)
    sampled(history, 99.0, 105.0)
    node(history, 104.0, VICTIM, "DEAD")
    history.record(Source.OBSERVER, Kind.UNOBSERVABLE, t=105.5)
    sampled(history, 140.0, 150.0)
    with pytest.raises(ObserverGap, match="State API did not answer"):
        stays_dead(cast(Any, SimpleNamespace(history=history)), VICTIM, 100.0, "cut", until=149.0)


def test_a_comeback_seen_fails_stays_dead_even_with_a_gap() -> None:
    history = History()
    started(history, 99.0)
    sampled(history, 99.0, 105.0)
    node(history, 104.0, VICTIM, "DEAD")
    node(history, 105.0, VICTIM, "ALIVE")
    with pytest.raises(CheckFailed, match="went"):
        stays_dead(cast(Any, SimpleNamespace(history=history)), VICTIM, 100.0, "cut", until=149.0)


def test_no_fresh_sample_makes_stays_dead_inconclusive() -> None:
    """The check waits (twice the bound) for a sample stamped at or after its end."""
    history = History()
    started(history, 99.0, period=0.01, query_timeout=0.01)  # bound 0.08 s: a short wait
    sampled(history, 99.0, 110.0, every=0.05)
    node(history, 104.0, VICTIM, "DEAD")
    with pytest.raises(ObserverGap, match=r"no sample stamped after t=111.00 arrived"):
        stays_dead(cast(Any, SimpleNamespace(history=history)), VICTIM, 100.0, "cut", until=111.0)


def test_an_observer_that_never_started_is_no_evidence() -> None:
    history = History()
    node(history, 104.0, VICTIM, "DEAD")
    with pytest.raises(ObserverGap, match="never started"):
        stays_dead(cast(Any, SimpleNamespace(history=history)), VICTIM, 100.0, "cut", until=110.0)


# -- INV-02 -------------------------------------------------------------------------------------
def test_inv02_judges_a_fresh_sample_of_a_whole_window() -> None:
    now = time.time()
    history = History()
    started(history, now - 30)
    sampled(history, now - 30, now + 1)  # the last one stamped after the check begins
    node(history, now - 29, VICTIM, "ALIVE")
    kit(history).check_no_unexpected_death()


def test_a_silent_gap_makes_inv02_inconclusive() -> None:
    now = time.time()
    history = History()
    started(history, now - 60)
    sampled(history, now - 60, now - 55)
    node(history, now - 59, VICTIM, "ALIVE")
    sampled(history, now - 10, now + 1)
    with pytest.raises(ObserverGap, match=r"INV-02: .*45.0 s without a sample.*silent"):
        kit(history).check_no_unexpected_death()


def test_inv02_accepts_an_outage_the_observer_reported() -> None:
    """A GCS or head down (GCS-02 restarts the head): the GCS keeps dead nodes in its table,
    so the first sample after the outage shows a death that happened during it."""
    now = time.time()
    history = History()
    started(history, now - 60)
    sampled(history, now - 60, now - 55)
    history.record(Source.OBSERVER, Kind.UNOBSERVABLE, t=now - 54.5)
    history.record(Source.OBSERVER, Kind.OBSERVABLE, t=now - 10.5)
    sampled(history, now - 10, now + 1)
    node(history, now - 59, VICTIM, "ALIVE")
    kit(history).check_no_unexpected_death()
    node(history, now - 10, VICTIM, "DEAD")  # died during the outage, seen after it
    with pytest.raises(CheckFailed, match=r"INV-02: nodes died .*node-a"):
        kit(history).check_no_unexpected_death()


def test_a_death_seen_fails_inv02_even_with_a_gap() -> None:
    now = time.time()
    history = History()
    started(history, now - 60, period=0.01, query_timeout=0.01)  # a short wait for a sample
    sampled(history, now - 60, now - 55, every=0.05)
    node(history, now - 56, OTHER, "DEAD")
    with pytest.raises(CheckFailed, match=r"INV-02: nodes died .*node-b"):
        kit(history).check_no_unexpected_death()
    with pytest.raises(ObserverGap):  # spared: then only the gap is left, inconclusive
        kit(history, killed={OTHER}).check_no_unexpected_death()


def test_inv02_spares_only_the_autoscalers_own_termination_of_a_node_it_launched() -> None:
    """Ray's words for an idle node the autoscaler drained (node_manager.cc): EXPECTED_TERMINATION,
    "Terminated by autoscaler."; the harness retires the container a provider round later."""
    now = time.time()
    history = History()
    started(history, now - 30)
    sampled(history, now - 30, now + 1)
    drained = "Expected termination: Terminated by autoscaler."
    history.record(Source.OBSERVER, Kind.NODE_STATE, t=now - 5, node_id=OTHER, state="DEAD",
                   state_message=drained)  # fmt: skip
    with pytest.raises(CheckFailed, match=r"INV-02: nodes died .*node-b"):
        kit(history).check_no_unexpected_death()  # node-b was not launched by the autoscaler
    history.record("autoscaler", "autoscaler_launched", t=now - 25, node="node-b")
    kit(history).check_no_unexpected_death()
    history.record(Source.OBSERVER, Kind.NODE_STATE, t=now - 4, node_id=OTHER, state="DEAD",
                   state_message="Unexpected termination: health check failed")  # fmt: skip
    with pytest.raises(CheckFailed, match=r"INV-02: nodes died .*node-b"):
        kit(history).check_no_unexpected_death()


# -- the supervisor ------------------------------------------------------------------------------
class _Ended:
    """A stand-in for an agent stream that ran, sampled (or not), and ended."""

    def __init__(self, sampled: bool) -> None:
        self.running = False
        self.exit_code = 1
        self._sampled = sampled

    def events(self) -> list[Event]:
        return [Event(time.time(), Source.OBSERVER, Kind.SAMPLED)] if self._sampled else []

    def wait(self, timeout: float) -> bool:
        return True

    def wait_event(self, kinds: set[str], timeout: float) -> Event | None:
        return None

    def tail(self, lines: int = 20) -> str:
        return "Traceback: boom"

    def stop(self, grace_s: float = 5.0) -> None:
        pass


def _cluster(stream: Any) -> Any:
    return SimpleNamespace(
        history=History(),
        spec=SimpleNamespace(boot_timeout_s=180),
        dashboard_url="http://head:8265",
        driver=SimpleNamespace(name="driver"),
        stream=stream,
    )


def _wait(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_supervisor_gives_up_and_every_check_on_the_observer_is_inconclusive() -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise ChaosError("driver is not running")

    cluster = _cluster(down)
    observer = Observer(cluster, give_up_s=0.5).start()
    try:
        _wait(lambda: observer.failure is not None)
        assert observer.failure is not None and "driver is not running" in observer.failure
        assert observer.wait_first_sample(5.0) is False
        kinds = [e.kind for e in cluster.history.events(source=Source.OBSERVER)]
        assert kinds == [Kind.OBSERVER_LOST, Kind.OBSERVER_FAILED]
        with pytest.raises(ObserverGap, match="INV-02: the observer gave up: its agent stayed"):
            observed(cluster.history, 0.0, "INV-02")
    finally:
        observer.stop()


def test_an_agent_that_sampled_before_it_ended_is_started_again() -> None:
    starts: list[float] = []
    lock = threading.Lock()

    def stream(*args: Any, **kwargs: Any) -> Any:
        with lock:
            starts.append(time.monotonic())
        return _Ended(sampled=True)

    cluster = _cluster(stream)
    observer = Observer(cluster, give_up_s=0.5).start()
    try:
        _wait(lambda: len(starts) >= 3)
        assert len(starts) >= 3 and observer.failure is None
        lost = cluster.history.events(Kind.OBSERVER_LOST, source=Source.OBSERVER)
        assert lost and "exit code 1" in lost[0].get("error") and "boom" in lost[0].get("error")
    finally:
        observer.stop()


# -- the agent ---------------------------------------------------------------------------------
def test_the_agent_beats_only_for_samples_that_answered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sampled`` after a State API sample that answered, at most once per heartbeat; none
    while it fails (``unobservable``); the sampling stated in ``observer_started``."""
    import json
    import sys
    import types

    agent = Path(__file__).resolve().parents[2] / "chaos" / "agent"
    monkeypatch.syspath_prepend(str(agent))  # as in a node: the agent is a top-level package
    from raychaos_agent import MARK, observe  # type: ignore[import-not-found]

    calls: list[dict[str, Any]] = []
    down = threading.Event()

    def list_nodes(**query: Any) -> list[Any]:
        calls.append(query)
        if down.is_set():
            raise ConnectionError("the GCS is down")
        return [SimpleNamespace(node_id="n1", state="ALIVE")]

    state = types.ModuleType("ray.util.state")
    state.list_nodes = list_nodes  # type: ignore[attr-defined]
    state.list_actors = state.list_placement_groups = lambda **q: []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    monkeypatch.setitem(sys.modules, "ray.util", types.ModuleType("ray.util"))
    monkeypatch.setitem(sys.modules, "ray.util.state", state)
    monkeypatch.setattr(sys, "__stdout__", sys.stdout)  # emit writes to the real stdout
    threading.Timer(0.3, down.set).start()
    argv = ["--dashboard", "http://head:8265", "--period", "0.01", "--heartbeat", "0.1"]
    assert observe.main([*argv, "--query-timeout", "3", "--timeout", "0.6"]) == 0
    events = [
        json.loads(line.removeprefix(MARK))
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(MARK)
    ]
    kinds = [e["event"] for e in events]
    first = events[0]
    assert first["event"] == "observer_started"
    assert (first["period"], first["heartbeat"], first["queries"], first["query_timeout"]) == (
        0.01,
        0.1,
        1,
        3,
    )
    assert all(q["timeout"] == 3 and isinstance(q["timeout"], int) for q in calls)
    beats = [e["t"] for e in events if e["event"] == "sampled"]
    assert 2 <= len(beats) <= 5, kinds  # ~0.3 s answering at one beat per 0.1 s
    assert all(b - a >= 0.09 for a, b in itertools.pairwise(beats))
    down_at = next(e["t"] for e in events if e["event"] == "unobservable")
    assert all(t < down_at for t in beats), "no heartbeat while the State API fails"
    assert kinds.index("node_state") < kinds.index("sampled")  # transitions first
