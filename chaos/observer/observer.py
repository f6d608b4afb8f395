"""The observer: a background sampler of node, actor and placement-group state.

It runs as an agent process on the driver node (``raychaos_agent.observe``) and reads the
State API through the head's dashboard over the cluster network, streaming transitions into
the history through ``docker exec``. While the GCS or the head is down it records
``unobservable`` instead of failing, and carries on when they return. Its heartbeats
(``sampled``) let a check tell a quiet cluster from a stalled observer
(:mod:`chaos.observer.gaps`). If its agent ends, it is started again, but only while the
driver node comes back within the boot timeout: then ``observer_failed`` is recorded and every
check that reads the observer is inconclusive.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from chaos.history import Kind, Source
from chaos.observer.gaps import Sampling

if TYPE_CHECKING:
    from chaos.backends.base import Stream
    from chaos.cluster.cluster import Cluster

SOURCE = Source.OBSERVER
#: Seconds between samples. Every window the suite judges is seconds wide with 6 s of observer
#: slack (``chaos.check.bands``), and node deaths are timed by the GCS's own ``end_time_ms``;
#: 0.5 s instead of 0.25 s halves the State API queries the head's dashboard and GCS answer.
PERIOD_S = 0.5


class Observer:
    """Samples every ``period`` seconds (:data:`PERIOD_S` by default) until stopped.

    ``give_up_s``: how long the agent may stay down (ended, or not startable) before the
    supervisor stops starting it again; default the cluster's boot timeout, the time a
    restarted driver node has to come back.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        period: float = PERIOD_S,
        actors: bool = True,
        pgs: bool = True,
        give_up_s: float | None = None,
    ) -> None:
        self.cluster = cluster
        self.period = period
        self.actors = actors
        self.pgs = pgs
        self.sampling = Sampling.every(period, queries=1 + int(actors) + int(pgs))
        self.give_up_s = cluster.spec.boot_timeout_s if give_up_s is None else give_up_s
        #: Why the supervisor gave up (None while it has not).
        self.failure: str | None = None
        self._stream: Stream | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Observer:
        self._thread = threading.Thread(target=self._supervise, name="observer", daemon=True)
        self._thread.start()
        return self

    def _argv(self) -> list[str]:
        argv = [
            "python",
            "-u",
            "-m",
            "raychaos_agent.observe",
            "--dashboard",
            self.cluster.dashboard_url,
            "--period",
            str(self.period),
            "--heartbeat",
            str(self.sampling.heartbeat_s),
            "--query-timeout",
            str(int(self.sampling.query_timeout_s)),
        ]
        return argv + (["--actors"] if self.actors else []) + (["--pgs"] if self.pgs else [])

    def _supervise(self) -> None:
        # If the node hosting the observer restarts, start the agent again; a run of failures
        # longer than give_up_s ends it, said in the history (never retried forever, never
        # swallowed: the checks read observer_failed and end inconclusive).
        down_since: float | None = None
        while not self._stopped.is_set():
            outcome = self._run_agent()
            if outcome is None:
                return  # stopped
            sampled, why = outcome
            now = time.monotonic()
            if sampled or down_since is None:
                down_since = now
                self.cluster.history.record(SOURCE, Kind.OBSERVER_LOST, error=why)
            elif now - down_since > self.give_up_s:
                self.failure = f"its agent stayed down over {self.give_up_s:.0f} s: {why}"
                self.cluster.history.record(SOURCE, Kind.OBSERVER_FAILED, error=self.failure)
                return
            self._stopped.wait(1.0)

    def _run_agent(self) -> tuple[bool, str] | None:
        """Run the agent until it ends: whether it sampled, and why it ended (None: stopped)."""
        try:
            stream = self.cluster.stream(
                self.cluster.driver.name, self._argv(), source=SOURCE, bound_s=3600
            )
        except Exception as exc:  # noqa: BLE001 - the host node may be down: bounded by the caller
            return False, f"could not start it: {type(exc).__name__}: {exc}"
        self._stream = stream
        while stream.running and not self._stopped.is_set():
            stream.wait(0.5)
        if self._stopped.is_set():
            return None
        sampled = any(e.kind == Kind.SAMPLED for e in stream.events())
        return sampled, f"it ended (exit code {stream.exit_code}): {stream.tail(3).strip()}"

    def wait_first_sample(self, timeout: float) -> bool:
        """True once the State API answered the observer (its first node sample arrived)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0 and self.failure is None:
            stream = self._stream
            if stream is not None and stream.wait_event({Kind.NODE_STATE}, min(left, 1.0)):
                return True
            if stream is None:
                self._stopped.wait(min(left, 0.25))
        return False

    def stop(self) -> None:
        self._stopped.set()
        if self._stream is not None:
            self._stream.stop(grace_s=2)
        if self._thread is not None:
            self._thread.join(10)

    def latest_nodes(self) -> dict[str, dict[str, Any]]:
        """Last seen state of every Ray node id (as of the last transition: judge it with
        :func:`~chaos.observer.gaps.observed` first)."""
        latest: dict[str, dict[str, Any]] = {}
        for event in self.cluster.history.events(Kind.NODE_STATE, source=SOURCE):
            latest[str(event.get("node_id"))] = event.fields
        return latest
