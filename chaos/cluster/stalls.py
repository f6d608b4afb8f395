"""A sampler of every node's CPU stall while an experiment runs, into its history.

Once a second it asks the backend how long each node's processes have waited for a CPU so
far (:meth:`chaos.backends.base.Backend.cpu_stalled_s`: the ``full`` total of the node's
cgroup pressure stall information) and records the readings that answered as one
``cpu_stall`` event. :mod:`chaos.check.stalls` judges windows from those events; the timeline
draws them as a lane. A backend that cannot say (a remote engine) records nothing, and then
nothing is ever judged inconclusive for a stall.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from chaos.history import Kind, Source

if TYPE_CHECKING:
    from chaos.cluster.readiness import Booting

#: Seconds between samples: the resolution of a stall's window. A read is one small file per
#: node on the host (microseconds), so a second costs nothing measurable.
PERIOD_S = 1.0


class StallSampler:
    """Samples ``cluster``'s nodes every :data:`PERIOD_S` until :meth:`stop` (a daemon thread
    that never raises: a missing figure is a gap in the lane, never a failed test)."""

    def __init__(
        self,
        cluster: Booting,
        period_s: float = PERIOD_S,
        every: tuple[float, Callable[[], object]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.period_s = period_s
        #: (seconds, action): also run ``action`` that often (the history's checkpoint).
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raychaos-stalls", daemon=True)

    def start(self) -> StallSampler:
        self.sample()
        self._thread.start()
        return self

    def sample(self) -> dict[str, float]:
        """One reading of every node that answers, recorded (and returned)."""
        found: dict[str, float] = {}
        try:
            for name in list(self.cluster.nodes):
                value = self.cluster.backend.cpu_stalled_s(name)
                if value is not None:
                    found[name] = round(value, 4)
            if found:
                self.cluster.history.record(Source.HARNESS, Kind.CPU_STALL, stalled=found)
        except Exception:  # noqa: BLE001 - a sampler never fails a test: a gap in the lane
            return {}
        return found

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.period_s):
            self.sample()
            if self.every is not None and time.monotonic() - last >= self.every[0]:
                last = time.monotonic()
                with contextlib.suppress(Exception):  # a checkpoint is best effort
                    self.every[1]()

    def stop(self) -> None:
        """Stop sampling, with one last reading (the window's end)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5 * self.period_s)
        self.sample()
