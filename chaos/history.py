"""One ordered event log per experiment: nemesis, workload and observer events (Jepsen's history).

Every event carries a wall-clock timestamp. Events from inside the cluster are stamped there;
containers share the host kernel's clock, so the two sources are comparable.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from chaos.errors import WorkloadTimeout


class Source(StrEnum):
    """Who recorded an event on the host side. Workloads record as ``workload-N``."""

    HARNESS = "harness"
    NEMESIS = "nemesis"
    OBSERVER = "observer"
    CHECKER = "checker"


class Kind(StrEnum):
    """Every event kind raychaos itself records or its agent emits.

    Workloads add their own kinds (``tasks_running``, ``node_busy``…) as plain strings; a
    :class:`StrEnum` member equals its string, so both kinds of event read alike.
    """

    # harness: the cluster's life
    NETWORK_CREATED = "network_created"
    BOOT_SLOT = "boot_slot"
    CONTAINERS_STARTED = "containers_started"
    CLUSTER_READY = "cluster_ready"
    NODE_START_RETRIED = "node_start_retried"
    NODE_ADDED = "node_added"
    NODE_REMOVED = "node_removed"
    WORKLOAD_START = "workload_start"
    SIGNAL = "signal"
    #: A streamed process ended (its stream will say nothing more).
    EXEC_ENDED = "exec_ended"
    # nemesis: faults
    INJECT = "inject"
    VERIFIED = "verified"
    NOT_OBSERVED = "not_observed"
    HEAL = "heal"
    HEAL_FAILED = "heal_failed"
    NODE_BACK = "node_back"
    # nemesis: a fault schedule (chaos.nemesis.churn)
    SCHEDULE = "schedule"
    STRIKE = "strike"
    STRIKE_SKIPPED = "strike_skipped"
    REPLACED = "replaced"
    # observer: Ray's state as the State API shows it
    NODE_STATE = "node_state"
    ACTOR_STATE = "actor_state"
    PG_STATE = "pg_state"
    UNOBSERVABLE = "unobservable"
    OBSERVABLE = "observable"
    OBSERVER_STARTED = "observer_started"
    OBSERVER_TIMEOUT = "observer_timeout"
    #: A State API sample answered (a heartbeat: at most one per few sampling periods).
    SAMPLED = "sampled"
    #: The observer's agent ended or could not start; the supervisor starts it again.
    OBSERVER_LOST = "observer_lost"
    #: The supervisor gave up: every check that reads the observer is inconclusive.
    OBSERVER_FAILED = "observer_failed"
    # checker
    MEASUREMENT = "measurement"
    # agent protocol (raychaos_agent): how a workload or probe ends
    RESULT = "result"
    ERROR = "error"
    HARNESS_ERROR = "harness_error"
    READY = "ready"
    NOT_READY = "not_ready"
    CONNECTED = "connected"
    STARTED = "started"
    INV01 = "inv01"
    #: Each node's cumulative CPU stall (seconds its processes waited for a CPU), sampled
    #: every second by :class:`chaos.cluster.stalls.StallSampler`: ``stalled={node: s}``.
    CPU_STALL = "cpu_stall"
    #: A judged window the host was too busy to judge (:mod:`chaos.check.stalls`).
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Event:
    """One thing that happened: who saw it (``source``), what (``kind``), when (``t``)."""

    t: float
    source: str
    #: A :class:`Kind` for raychaos's own events, any string for a workload's.
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "source": str(self.source), "kind": str(self.kind), **self.fields}


Predicate = Callable[[Event], bool]


class History:
    """A thread-safe, append-only event log that can be waited on."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._cond = threading.Condition()

    def record(
        self, source: Source | str, kind: Kind | str, t: float | None = None, **fields: Any
    ) -> Event:
        event = Event(t=time.time() if t is None else t, source=source, kind=kind, fields=fields)
        self.append(event)
        return event

    def append(self, event: Event) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()

    def events(self, kind: str | None = None, source: str | None = None) -> list[Event]:
        """Events ordered by time, optionally only one kind and/or one source."""
        with self._cond:
            selected = [
                e
                for e in self._events
                if (kind is None or e.kind == kind) and (source is None or e.source == source)
            ]
        return sorted(selected, key=lambda e: e.t)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        with self._cond:
            return len(self._events)

    def await_event(self, match: Predicate, timeout: float) -> Event | None:
        """The first matching event, waiting at most ``timeout``; None if there is none yet."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self._events:
                    if match(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def wait_for(
        self,
        match: Predicate,
        *,
        count: int = 1,
        timeout: float,
        what: str,
        done: Callable[[], bool] | None = None,
    ) -> list[Event]:
        """Block until ``count`` events match, or raise :class:`WorkloadTimeout` after ``timeout``.

        ``done`` says the producer has ended, so waiting longer cannot help.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                hits = [e for e in self._events if match(e)]
                if len(hits) >= count:
                    return sorted(hits, key=lambda e: e.t)[:count]
                left = deadline - time.monotonic()
                ended = done() if done else False
                if left <= 0 or ended:
                    recent = ", ".join(f"{e.source}:{e.kind}" for e in self._events[-8:])
                    raise WorkloadTimeout(
                        f"waited for {count} × {what}: saw {len(hits)} "
                        f"{'before the producer ended' if ended else f'in {timeout:.0f} s'}",
                        hint=f"recent events: {recent or 'none'}",
                    )
                self._cond.wait(min(left, 0.5))

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.events()]

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, default=repr)
