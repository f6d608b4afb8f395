"""A process inside a container, streamed live through ``docker exec``.

Lines the agent marks (``@@raychaos {json}``) become :class:`~chaos.history.Event` s
as they arrive: in the stream's own channel (:meth:`ExecStream.events`, which readiness and
INV-01 read) and in the experiment's history (the evidence log); every other line is kept as
output. The process is bounded inside the
container by coreutils ``timeout``, so a lost host can never leave it running forever.

Also the bounds of a one-shot exec (:meth:`DockerBackend.exec`): :func:`in_node_bound` (what
``timeout`` is given) and :func:`drain` (how long the host waits for the output to end).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from chaos.backends.base import EventSink
from chaos.backends.docker.client import EngineUnresponsive, call, translated
from chaos.errors import DockerOperationError, WorkloadError
from chaos.history import Event, Kind

if TYPE_CHECKING:
    from docker.models.containers import Container

MARK = b"@@raychaos "
#: Grace between SIGTERM and SIGKILL when the in-container bound runs out.
KILL_AFTER_S = 5
#: How much longer than the in-node bound (and its kill grace) the host waits for an exec's
#: output to end before it takes the engine as hung (a loaded engine reaps slowly).
HOST_MARGIN_S = 30.0


def in_node_bound(seconds: float) -> int:
    """Whole seconds for coreutils ``timeout``: rounded up, at least 1 (``timeout 0`` would
    mean no limit at all). A bound that is not a positive number is one line."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise WorkloadError(
            f"exec bound: expected a number of seconds > 0, got {seconds!r}",
            hint="pass timeout=/bound_s= as the seconds the command may run",
        )
    return max(1, math.ceil(seconds))


def host_bound(seconds: float) -> float:
    """How long the host waits for an exec bounded by ``seconds`` inside its node to end."""
    return in_node_bound(seconds) + KILL_AFTER_S + HOST_MARGIN_S


class Closable(Protocol):
    """An exec's output (docker-py's ``CancellableStream``): chunks, closable from another
    thread."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


def drain(chunks: Closable, *, within: float, what: str) -> bytes:
    """All of an exec's output, waiting at most ``within`` seconds for it to end.

    docker-py reads an exec's output with no bound of its own (it polls the socket before each
    read, so the client's timeout never applies): a hung engine, or a dead link to a remote
    one, would block the caller forever. The output is read by a helper thread; past
    ``within`` the stream is closed (which wakes that thread) and one
    :class:`EngineUnresponsive` line says so.
    """
    got: list[bytes] = []
    failed: list[Exception] = []

    def pump() -> None:
        try:
            for chunk in chunks:
                got.append(bytes(chunk))
        except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(exc)

    reader = threading.Thread(target=pump, name=f"drain: {what}"[:60], daemon=True)
    reader.start()
    reader.join(within)
    # Ended or not, the connection goes (docker-py leaves a streamed response open); a hung
    # one is shut down, which wakes the reader.
    with contextlib.suppress(Exception):  # SSH channels cannot be cancelled: left to the GC
        chunks.close()
    if reader.is_alive():
        raise EngineUnresponsive(
            f"{what}: expected its output to end within {within:.0f} s (the in-node bound, "
            f"{KILL_AFTER_S} s to kill, {HOST_MARGIN_S:.0f} s of slack), got "
            f"{sum(map(len, got))} bytes and no end",
            hint="the engine (or the link to it) is hung: check `docker info` and the daemon's log",
        )
    if failed:
        with translated(what):
            raise failed[0]
    return b"".join(got)


class ExecStream:
    """Start ``argv`` in ``container`` and follow its output until it ends."""

    def __init__(
        self,
        container: Container,
        argv: Sequence[str],
        *,
        source: str,
        sink: EventSink,
        env: Mapping[str, str] | None = None,
        bound_s: float,
    ) -> None:
        self.container = container
        self.source = source
        self.sink = sink
        self.argv = list(argv)
        self.output: list[str] = []
        self.exit_code: int | None = None
        self.pid: int | None = None
        self._ended = threading.Event()
        self._events: list[Event] = []
        self._arrived = threading.Condition()
        bound = in_node_bound(bound_s)
        bounded = ["timeout", f"--kill-after={KILL_AFTER_S}", str(bound), *self.argv]
        if container.client is None:
            raise DockerOperationError(f"{container.name}: a container object without a client")
        api = container.client.api
        self._exec_id: str = call(
            f"exec in {container.name}",
            lambda: api.exec_create(container.id, bounded, environment=dict(env or {}))["Id"],
        )
        self._sock: Any = call(
            f"exec in {container.name}",
            lambda: api.exec_start(self._exec_id, stream=True, demux=True),
        )
        self._thread = threading.Thread(target=self._pump, name=f"exec:{source}", daemon=True)
        self._thread.start()

    # -- reading --------------------------------------------------------------------------
    def _pump(self) -> None:
        # stdout and stderr frames interleave; keep a partial line per stream.
        buffers = [b"", b""]
        try:
            for frames in self._sock:
                for index, chunk in enumerate(frames):
                    if not chunk:
                        continue
                    buffers[index] += chunk
                    *lines, buffers[index] = buffers[index].split(b"\n")
                    for line in lines:
                        self._line(line)
            for rest in buffers:
                if rest:
                    self._line(rest)
        except Exception as exc:  # noqa: BLE001 - the container (and its exec) may be gone
            self.output.append(f"[raychaos] exec stream broke: {exc!r}")
        finally:
            self.exit_code = self._inspect_exit()
            self._ended.set()
            # Wake anyone waiting: this producer will say nothing more.
            self._deliver(
                Event(time.time(), self.source, Kind.EXEC_ENDED, {"exit_code": self.exit_code})
            )

    def _deliver(self, event: Event) -> None:
        with self._arrived:
            self._events.append(event)
            self._arrived.notify_all()
        self.sink(event)

    def _line(self, raw: bytes) -> None:
        # Events from tasks and actors reach the driver through Ray's log forwarding, which
        # prefixes them ("(task pid=…, ip=…) "): the mark may stand anywhere in the line.
        at = raw.find(MARK)
        if at >= 0:
            try:
                data = json.loads(raw[at + len(MARK) :])
            except json.JSONDecodeError:
                self.output.append(raw.decode(errors="replace"))
                return
            t = float(data.pop("t", time.time()))
            kind = str(data.pop("event", "unknown"))
            if self.pid is None and isinstance(data.get("pid"), int):
                self.pid = data["pid"]
            self._deliver(Event(t=t, source=self.source, kind=kind, fields=data))
        else:
            self.output.append(raw.decode(errors="replace").rstrip("\r"))

    def _inspect_exit(self) -> int | None:
        for _ in range(20):
            try:
                client = self.container.client
                if client is None:
                    return None
                info = client.api.exec_inspect(self._exec_id)
            except Exception:  # noqa: BLE001 - the container (and its exec) may be gone
                return None
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            self._ended.wait(0.1)
        return None

    # -- control --------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    def events(self) -> list[Event]:
        with self._arrived:
            return list(self._events)

    def wait_event(self, kinds: set[str], timeout: float) -> Event | None:
        """The first event of one of ``kinds``, waiting at most ``timeout``; None if none."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                hit = next((e for e in self._events if e.kind in kinds), None)
                left = deadline - time.monotonic()
                if hit is not None or left <= 0:
                    return hit
                self._arrived.wait(left)

    def wait(self, timeout: float) -> bool:
        """True once the process has ended (within ``timeout``)."""
        return self._ended.wait(timeout)

    def stop(self, grace_s: float = 5.0) -> None:
        """End the process: SIGTERM by its PID in the container, SIGKILL after ``grace_s``."""
        if not self.running:
            return
        if self.pid is not None:
            for signal, wait_s in (("TERM", grace_s), ("KILL", grace_s)):
                try:
                    self.container.exec_run(["kill", f"-{signal}", str(self.pid)])
                except Exception:  # noqa: BLE001 - the container (and its exec) may be gone
                    break
                if self._ended.wait(wait_s):
                    return
        with contextlib.suppress(Exception):  # closing a dead socket
            self._sock.close()
        self._ended.wait(grace_s)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.output[-lines:])
