"""Windows, stays-dead and actor transitions over a synthetic history (no cluster)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from chaos.check import (
    actor_states,
    attempts,
    death_cause,
    fault_to_actor_alive,
    fault_to_node_dead,
    injected,
    since,
    stays_dead,
    unobservable_window,
)
from chaos.errors import CheckFailed
from chaos.history import Event, History, Kind, Source
from chaos.nemesis import Fault

VICTIM = "a" * 56
BYSTANDER = "b" * 56


@dataclass
class Recorded:
    """What the history checks need of an experiment: its history."""

    history: History = field(default_factory=History)

    def node(self, t: float, node_id: str, state: str, **fields: Any) -> None:
        self.history.record(
            Source.OBSERVER, Kind.NODE_STATE, t=t, node_id=node_id, state=state, **fields
        )

    def actor(self, t: float, actor_id: str, state: str, restarts: int) -> None:
        self.history.record(
            Source.OBSERVER,
            Kind.ACTOR_STATE,
            t=t,
            actor_id=actor_id,
            state=state,
            num_restarts=restarts,
        )

    def inject(self, t: float, fault: str, target: str) -> Event:
        return self.history.record(Source.NEMESIS, Kind.INJECT, t=t, fault=fault, target=target)

    def sampling(self, start: float, end: float, every: float = 1.0) -> None:
        """An observer (period 0.25 s) whose samples answered every ``every`` s from ``start``
        to ``end``: what a check needs to trust its silence."""
        self.history.record(Source.OBSERVER, Kind.OBSERVER_STARTED, t=start, period=0.25)
        t = start
        while t <= end:
            self.history.record(Source.OBSERVER, Kind.SAMPLED, t=t)
            t += every


# -- fault → node DEAD -------------------------------------------------------------------------
def test_node_dead_window_uses_the_gcs_end_time_when_the_row_has_it() -> None:
    seen = Recorded()
    seen.node(99.0, VICTIM, "ALIVE")
    kill = seen.inject(100.0, "kill_node", "worker-1")
    seen.node(101.0, VICTIM, "ALIVE")
    seen.node(106.0, VICTIM, "DEAD", end_time_ms=103_500)
    assert fault_to_node_dead(seen.history, kill, VICTIM) == pytest.approx(3.5)


@pytest.mark.parametrize("end_time_ms", [None, 0])
def test_node_dead_window_falls_back_to_the_observers_time(end_time_ms: int | None) -> None:
    seen = Recorded()
    kill = seen.inject(100.0, "kill_node", "worker-1")
    seen.node(106.25, VICTIM, "DEAD", end_time_ms=end_time_ms)
    assert fault_to_node_dead(seen.history, kill, VICTIM) == pytest.approx(6.25)


def test_node_dead_window_ignores_earlier_deaths_and_other_nodes() -> None:
    seen = Recorded()
    seen.node(90.0, VICTIM, "DEAD", end_time_ms=90_000)  # an earlier life of the same id
    kill = seen.inject(100.0, "kill_node", "worker-1")
    seen.node(102.0, BYSTANDER, "DEAD", end_time_ms=102_000)
    assert fault_to_node_dead(seen.history, kill, VICTIM) is None
    seen.node(104.0, VICTIM, "DEAD")
    assert fault_to_node_dead(seen.history, kill, VICTIM) == pytest.approx(4.0)


def test_injected_finds_the_nemesis_fault_by_kind_and_target() -> None:
    seen = Recorded()
    seen.history.record("workload-1", Kind.INJECT, t=1.0, fault="partition", target="x")
    cut = seen.inject(2.0, "partition", "worker-1")
    kill = seen.inject(3.0, "kill_node", "worker-2")
    assert injected(seen.history, "partition") == cut
    assert injected(seen.history, "kill_node", "worker-2") == kill
    with pytest.raises(LookupError, match="no kill_node fault on worker-1"):
        injected(seen.history, "kill_node", "worker-1")


def test_since_measures_from_the_strike_to_a_reported_time() -> None:
    strike = cast("Fault", type("Struck", (), {"injected_at": 100.0})())
    assert since(strike, 103.456) == 3.46
    with pytest.raises(AssertionError, match="did not report the time"):
        since(strike, None)


def test_unobservable_window_is_the_first_outage_after_the_fault() -> None:
    history = History()
    history.record(Source.OBSERVER, Kind.UNOBSERVABLE, t=50.0)
    history.record(Source.OBSERVER, Kind.OBSERVABLE, t=51.0)
    history.record(Source.OBSERVER, Kind.UNOBSERVABLE, t=110.0)
    assert unobservable_window(history, after=100.0) is None  # not back yet
    history.record(Source.OBSERVER, Kind.OBSERVABLE, t=118.5)
    assert unobservable_window(history, after=100.0) == pytest.approx(8.5)


def test_actor_alive_window_is_the_first_alive_of_that_actor() -> None:
    seen = Recorded()
    kill = seen.inject(10.0, "kill_worker", "worker-1:pid")
    seen.actor(11.0, "other", "ALIVE", 1)
    seen.actor(12.0, "actor", "RESTARTING", 1)
    seen.actor(13.5, "actor", "ALIVE", 1)
    assert fault_to_actor_alive(seen.history, kill, "actor") == pytest.approx(3.5)
    assert fault_to_actor_alive(seen.history, kill, "never") is None


# -- stays dead --------------------------------------------------------------------------------
def test_alive_before_dead_is_detection_time_and_passes() -> None:
    seen = Recorded()
    seen.sampling(99.0, 132.0)
    seen.node(100.5, VICTIM, "ALIVE")
    seen.node(104.0, VICTIM, "DEAD")
    seen.node(130.0, VICTIM, "DEAD")
    seen.node(131.0, BYSTANDER, "ALIVE")
    states = stays_dead(seen, VICTIM, since_t=100.0, label="cut", until=131.5)
    assert states == ["ALIVE", "DEAD", "DEAD"]


def test_alive_after_dead_is_a_comeback_and_fails() -> None:
    seen = Recorded()
    seen.node(104.0, VICTIM, "DEAD")
    seen.node(120.0, VICTIM, "ALIVE")
    with pytest.raises(AssertionError, match=r"cut: aaaaaaaa went \['DEAD', 'ALIVE'\]"):
        stays_dead(seen, VICTIM, since_t=100.0, label="cut")


def test_never_seen_dead_fails() -> None:
    seen = Recorded()
    seen.sampling(99.0, 110.0)
    seen.node(101.0, VICTIM, "ALIVE")
    seen.node(102.0, BYSTANDER, "DEAD")
    with pytest.raises(CheckFailed, match="never saw aaaaaaaa DEAD"):
        stays_dead(seen, VICTIM, since_t=100.0, label="cut", until=109.0)


def test_stays_dead_reads_only_the_observer_after_the_given_time() -> None:
    seen = Recorded()
    seen.node(90.0, VICTIM, "DEAD")  # before the window: an older death, then a restart
    seen.node(95.0, VICTIM, "ALIVE")
    seen.history.record("workload-1", Kind.NODE_STATE, t=105.0, node_id=VICTIM, state="ALIVE")
    seen.node(104.0, VICTIM, "DEAD")
    seen.sampling(90.0, 110.0)
    assert stays_dead(seen, VICTIM, since_t=100.0, label="cut", until=109.0) == ["DEAD"]


# -- actors and rows ---------------------------------------------------------------------------
def test_actor_states_are_transitions_of_one_actor_from_the_observer() -> None:
    seen = Recorded()
    seen.actor(1.0, "actor", "ALIVE", 0)
    seen.actor(1.2, "actor", "ALIVE", 0)  # the same sample again: not a transition
    seen.actor(1.3, "other", "DEAD", 0)
    seen.actor(2.0, "actor", "RESTARTING", 1)
    seen.actor(3.0, "actor", "ALIVE", 1)
    seen.history.record("workload-1", Kind.ACTOR_STATE, t=3.5, actor_id="actor", state="DEAD")
    seen.actor(4.0, "actor", "DEAD", 1)
    assert actor_states(seen, "actor") == [
        ("ALIVE", 0),
        ("RESTARTING", 1),
        ("ALIVE", 1),
        ("DEAD", 1),
    ]
    assert actor_states(seen, "nobody") == []


def test_attempts_and_death_cause_reduce_state_api_rows() -> None:
    rows: list[dict[str, Any]] = [
        {"state": "FAILED", "error_type": "NODE_DIED", "x": 1},
        {"state": "FINISHED"},
    ]
    assert attempts(rows) == [["FAILED", "NODE_DIED"], ["FINISHED", None]]
    row = {"death_cause": {"actor_died_error_context": {"reason": "NODE_DIED"}}}
    assert death_cause(row) == {"reason": "NODE_DIED"}
    assert death_cause({"death_cause": None}) == {}
    with pytest.raises(AssertionError, match="no row for the actor"):
        death_cause(None)
