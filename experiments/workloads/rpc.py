"""RPC failure workloads (CHURN-06, CHURN-07): one call whose RPCs fail as this driver's
``RAY_testing_rpc_failure`` says, its outcome, and every execution recorded where it ran.

Executions go to a file on the node that ran them (one line per execution: its PID), which
the host reads with ``docker exec``: a count kept through Ray (an actor, a log line) would
travel over the very RPCs whose failures are under test. Exceptions come back as data.
"""

from __future__ import annotations

import os

import ray
from raychaos_agent import emit, node_id

from workloads.tasks import connect, outcome_of

#: Where each execution leaves its line, on the node that ran it.
RECORDS = "/tmp/raychaos-executions"
#: The custom resource of the node that runs the calls (not the driver's node: a push crosses
#: the network as it does in production).
TARGET = "rpc_target"


def _record(token: str) -> None:
    os.makedirs(RECORDS, exist_ok=True)
    with open(os.path.join(RECORDS, token), "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\n")
    emit("executed", token=token, pid=os.getpid(), node_id=node_id())


@ray.remote
def _traced(token: str, value: int) -> int:
    _record(token)
    return value


@ray.remote
class Traced:
    def call(self, token: str, value: int) -> int:
        _record(token)
        return value


def task(token: str, max_retries: int, timeout_s: float) -> None:
    """One task with ``max_retries``; emits ``outcome``."""
    connect()
    ref = _traced.options(max_retries=max_retries, resources={TARGET: 0.01}).remote(token, 42)
    emit("outcome", token=token, **outcome_of(ref, timeout_s))


def actor_call(token: str, max_task_retries: int, timeout_s: float) -> None:
    """One call of a fresh actor's method (the driver's first push), then a second call of
    the same actor; emits ``outcome`` and ``next_call``."""
    connect()
    actor = Traced.options(max_task_retries=max_task_retries, resources={TARGET: 0.01}).remote()
    emit("outcome", token=token, **outcome_of(actor.call.remote(token, 42), timeout_s))
    emit("next_call", token=token, **outcome_of(actor.call.remote(f"{token}-next", 43), timeout_s))
