"""What the State API reported, reduced to what an experiment asserts on.

Task attempts as ``[state, error_type]`` pairs, an actor's death cause, an actor's state
transitions as the observer sampled them: short values that read well in an assertion message.
"""

from __future__ import annotations

import time
from typing import Any

from chaos.check.windows import WithHistory
from chaos.errors import CheckFailed
from chaos.history import Kind, Source
from chaos.observer.gaps import observed


def attempts(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """State API task attempts as ``[state, error_type]``, oldest first."""
    return [[r.get("state"), r.get("error_type")] for r in rows]


def death_cause(row: dict[str, Any] | None) -> dict[str, Any]:
    """``death_cause.actor_died_error_context`` of a State API actor row."""
    if row is None:
        raise CheckFailed("the State API has no row for the actor")
    cause = row.get("death_cause") or {}
    if not isinstance(cause, dict):
        raise CheckFailed(f"unexpected death_cause {cause!r}")
    return dict(cause.get("actor_died_error_context") or {})


def actor_states(
    experiment: WithHistory, actor_id: str, *, fresh: bool = False
) -> list[tuple[Any, Any]]:
    """The observer's ``(state, num_restarts)`` transitions of one actor, oldest first.

    ``fresh``: first wait (bounded) for an observer sample taken from now on, so a state a
    workload has just seen in the State API is in the history too (the observer samples every
    period and its events travel out of the node); no such sample is :class:`ObserverGap`.
    """
    if fresh:
        observed(experiment.history, time.time(), f"the observer's states of actor {actor_id}")
    seen: list[tuple[Any, Any]] = []
    for e in experiment.history.events(Kind.ACTOR_STATE, source=Source.OBSERVER):
        if e.get("actor_id") == actor_id:
            key = (e.get("state"), e.get("num_restarts"))
            if not seen or seen[-1] != key:
                seen.append(key)
    return seen
