"""The observer: a background sampler of node, actor and placement-group state.

It runs as an agent process on the driver node (``raychaos_agent.observe``) and reads the
State API through the head's dashboard over the cluster network, streaming transitions into
the history through ``docker exec``. While the GCS or the head is down it records
``unobservable`` instead of failing, and carries on when they return.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from chaos.observer.history import Kind, Source

if TYPE_CHECKING:
    from chaos.backends.base import Stream
    from chaos.cluster.cluster import Cluster

SOURCE = Source.OBSERVER


class Observer:
    """Samples every ``period`` seconds (≤ 0.25 s by default) until stopped."""

    def __init__(
        self, cluster: Cluster, *, period: float = 0.25, actors: bool = True, pgs: bool = True
    ) -> None:
        self.cluster = cluster
        self.period = period
        self.actors = actors
        self.pgs = pgs
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
        ]
        return argv + (["--actors"] if self.actors else []) + (["--pgs"] if self.pgs else [])

    def _supervise(self) -> None:
        # If the node hosting the observer restarts, start it again (bounded by stop()).
        while not self._stopped.is_set():
            try:
                stream = self.cluster.stream(
                    self.cluster.driver.name, self._argv(), source=SOURCE, bound_s=3600
                )
            except Exception:  # noqa: BLE001 - the host node is down: try again shortly
                self._stopped.wait(1.0)
                continue
            self._stream = stream
            while stream.running and not self._stopped.is_set():
                stream.wait(0.5)
            self._stopped.wait(1.0)

    def wait_first_sample(self, timeout: float) -> bool:
        """True once the State API answered the observer (its first node sample arrived)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
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
        """Last seen state of every Ray node id."""
        latest: dict[str, dict[str, Any]] = {}
        for event in self.cluster.history.events(Kind.NODE_STATE, source=SOURCE):
            latest[str(event.get("node_id"))] = event.fields
        return latest
