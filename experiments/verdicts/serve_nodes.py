"""SERVE-03 as a pure verdict: a worker node hosting replicas dies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos.testing import Judging, verdict

from .serve_traffic import (
    Load,
    failures,
    longest_gap,
)

# -- SERVE-03: a worker node hosting replicas dies ---------------------------------------------


@dataclass(frozen=True)
class NodeDeath:
    """What SERVE-03's run recorded: the node kill, the GCS's time of death (its
    ``end_time_ms``), the new replica ALIVE on the survivor, and the traffic window's end."""

    killed_at: float
    dead_at: float
    new_alive: float | None
    end: float


@verdict("SERVE-03")
def replicas_moved(
    j: Judging,
    load: Load,
    death: NodeDeath,
    band: tuple[float, float],
    bound_s: float,
    targets: Sequence[str],
    request_timeout_s: float,
) -> str:
    """The dead node's replica is started on the survivor within the node-death band, a
    check and a start; through the surviving proxies no request sent after the GCS declared
    the node dead failed, and before that at most what the client's threads can have had on
    the dead replica (the cap below)."""
    new_alive = j.found(death.new_alive, "the observer never saw the new replica ALIVE")
    window = j.measure(
        "SERVE-03 node kill → replica ALIVE on worker-2 (s)",
        round(new_alive - death.killed_at, 2),
        band=(band[0], bound_s),
        start=death.killed_at,
    )
    j.require(
        window <= bound_s,
        f"the replica moved {window} s after the kill; node death band {band}, then a health "
        f"check and the replica's start (bound {bound_s:.1f} s)",
    )
    # Until the GCS declares the node dead, a proxy may still route to its replica: Ray has
    # no earlier word of the death. Judged: requests sent after the GCS's time of death.
    t0, t1 = death.killed_at - request_timeout_s, death.end
    failed = {t: failures(load, t, t0, t1) for t in targets}
    before = {t: [f for f in v if f["sent"] <= death.dead_at] for t, v in failed.items()}
    later = {t: [f for f in v if f["sent"] > death.dead_at] for t, v in failed.items()}
    j.measure(
        "SERVE-03 failed requests sent before worker-1 was DEAD",
        {t: len(v) for t, v in before.items()},
    )
    j.measure(
        "SERVE-03 failed requests sent after worker-1 was DEAD",
        {t: len(v) for t, v in later.items()},
    )
    j.measure(
        "SERVE-03 longest gap between answers (s)",
        {t: longest_gap(load, t, t0, t1) for t in targets},
    )
    # The cap on failures before DEAD. A client thread holds one request at a time. A request
    # that Ray fails on the dead replica takes it out of its proxy's routing: the router drops
    # its queue-length entry (``ActorUnavailableError`` → ``on_replica_actor_unavailable``, or
    # ``ActorDiedError`` → ``on_replica_actor_died``: ``router.py``), and a replica without an
    # entry is chosen only after it answers a queue-length probe, which a dead one never does
    # (``RequestRouter._probe_queue_lens``: no answer → not chosen). Only a request the client
    # gives up on (the request timeout) leaves the entry, so a thread may lose one request in
    # flight on (or routed to) the victim, and one more per full client timeout that fits
    # between the kill and the GCS's time of death.
    per_thread = 1 + int(max(0.0, death.dead_at - death.killed_at) // request_timeout_s)
    cap = j.measure(
        "SERVE-03 cap on failed requests per proxy before DEAD",
        int(load["threads_per_target"]) * per_thread,
    )
    over = {t: v[:8] for t, v in before.items() if len(v) > cap}
    j.require(
        not over,
        f"more requests failed before worker-1 was DEAD than the client's threads can have had "
        f"on its replica ({cap} per proxy: {load['threads_per_target']} threads × "
        f"{per_thread}): {over}",
    )
    j.require(
        not any(later.values()),
        f"requests sent after worker-1 was DEAD failed: { ({t: v[:5] for t, v in later.items() if v}) }",
    )
    lost = sum(len(v) for v in before.values())
    return (
        f"the replica ALIVE on the survivor {window} s after the kill; {lost} request(s) failed "
        f"before the GCS's DEAD (cap {cap} per proxy), none after"
    )
