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
from typing import Any

from chaos.errors import WorkloadTimeout


@dataclass(frozen=True)
class Event:
    """One thing that happened: who saw it (``source``), what (``kind``), when (``t``)."""

    t: float
    source: str
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "source": self.source, "kind": self.kind, **self.fields}


Predicate = Callable[[Event], bool]


class History:
    """A thread-safe, append-only event log that can be waited on."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._cond = threading.Condition()

    def record(self, source: str, kind: str, t: float | None = None, **fields: Any) -> Event:
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
