"""Several Docker engines for one run: which engine a process uses, and what it needs there.

``--raychaos-docker-host`` (repeatable; ``RAYCHAOS_DOCKER_HOSTS`` and the ini key take a list)
names the engines; without it the run has one, ``DOCKER_HOST`` or the local socket.

**Spread by xdist worker.** Worker ``gwN`` boots its clusters on engine ``N mod count`` (the
main process, without xdist, on the first). One engine per process keeps everything that is
per process also per engine — one reaper, one sweep, one image builder, one client — and
xdist's own scheduling does the balancing: a worker whose engine is slower simply takes fewer
tests. Spreading test by test instead would make every process talk to every engine (a
reaper and a sweep each, images needed everywhere at once) for no better balance. Run with
``-n`` at least the number of engines, or some engines get nothing (the header says so).

**What each engine gets on first use in a process** (:meth:`EnginePool.use`): a client
(checked with a ping), its ``info()`` (``ID``, ``NCPU``), a reaper watching this process on
that engine (:mod:`chaos.backends.docker.reaper`), a sweep of what dead runs left there
(:mod:`chaos.backends.docker.sweep`), and an image builder that carries images from another
engine of the run by ``docker save``/``docker load`` through the API before it would build
(:meth:`chaos.backends.docker.images.ImageBuilder.ensure`). Boot slots are counted per engine
from its own CPUs, one per two cores, with lock files keyed by its ID
(:mod:`chaos.cluster.boot_slots`).

**An engine that dies mid-run** (:class:`EngineUse.check`, called by the plugin when a test
fails): the experiments it was hosting end broken with one line,
``EngineLost: engine unix:///… stopped answering: …``; the process then moves its next
experiments to the next engine that answers (:meth:`EnginePool.pick`), so one dead machine
breaks what ran on it, not the rest of the suite. Its objects are left to the reaper (when the
engine comes back before the process ends) and to the next run's sweep.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from chaos.backends.docker.client import LOCAL_SOCKET, EngineLost, answers, call, connect
from chaos.errors import DockerUnavailable

if TYPE_CHECKING:
    import docker

    from chaos.backends.docker.images import BuildSettings, ImageBuilder, Progress

Say = Callable[[str], None]
Connect = Callable[[str, float], "docker.DockerClient"]

#: How long a liveness check waits for the engine's answer to a ping.
CHECK_TIMEOUT_S = 10.0
#: Connect timeout of clients used only to read images from another engine (a transfer's
#: save has its own bound, :data:`chaos.backends.docker.images.TRANSFER_TIMEOUT_S`).
DONOR_TIMEOUT_S = 15.0
#: The client timeout of an engine the process boots clusters on (as before: DOCKER_HOST's).
CLIENT_TIMEOUT_S = 120.0

_WORKER = re.compile(r"gw(\d+)")


# -- which engine ----------------------------------------------------------------------------
def default_url(env: Mapping[str, str] | None = None) -> str:
    """``DOCKER_HOST``, else the local socket: the one engine of a run that names none."""
    env = os.environ if env is None else env
    return env.get("DOCKER_HOST", "").strip() or LOCAL_SOCKET


def engine_urls(configured: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The run's engines: those configured, else :func:`default_url`."""
    return tuple(configured) or (default_url(env),)


def display(url: str) -> str:
    """How reports name an engine: its URL without a password (``ssh://ci@host``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def current_worker() -> str:
    """This process's xdist worker id (``gw3``), or ``main`` without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def planned_url(urls: Sequence[str], worker: str) -> str:
    """Worker ``gwN`` → engine ``N mod len(urls)``; anything else (``main``) → the first."""
    found = _WORKER.fullmatch(worker)
    index = int(found.group(1)) if found else 0
    return urls[index % len(urls)]


def assignment(urls: Sequence[str], workers: int) -> dict[str, list[str]]:
    """Engine URL → the xdist workers that boot on it (``main`` without xdist)."""
    names = [f"gw{i}" for i in range(workers)] if workers > 0 else ["main"]
    found: dict[str, list[str]] = {url: [] for url in urls}
    for name in names:
        found[planned_url(urls, name)].append(name)
    return found


# -- an engine in use --------------------------------------------------------------------------
@dataclass
class EngineUse:
    """An engine this process boots clusters on."""

    url: str
    client: docker.DockerClient
    builder: ImageBuilder
    #: ``info()["ID"]``: boot-slot locks are keyed by it.
    id: str
    #: ``info()["NCPU"]``: one boot slot per two of them.
    cpus: int
    #: ``Docker 20.10.24, 2 CPUs, 23.5 GiB`` (the header and environment.properties).
    server: str
    #: Why the engine is taken as lost ("" while it answers).
    lost: str = ""

    @property
    def name(self) -> str:
        return display(self.url)

    def check(self, timeout: float = CHECK_TIMEOUT_S) -> str | None:
        """None while the engine answers a ping; else why not, and the engine is lost for the
        rest of this process."""
        if self.lost:
            return self.lost
        reason = answers(self.url, timeout)
        if reason is not None:
            self.lost = reason
        return reason

    def lost_error(self, during: str = "") -> EngineLost:
        """The one line a test on a lost engine ends with."""
        tail = f"; the test was at: {during}" if during else ""
        return EngineLost(
            f"engine {self.name} stopped answering: {self.lost}{tail}",
            hint="the experiments on the other engines go on; this engine's objects are left "
            f"to the reaper and the next run's sweep (`DOCKER_HOST={self.name} raychaos sweep`)",
        )


def describe_server(info: Mapping[str, object], version: str) -> str:
    memory = info.get("MemTotal")
    gib = f", {int(str(memory)) / 2**30:.1f} GiB" if str(memory or "").isdigit() else ""
    return f"Docker {version or '?'}, {info.get('NCPU', '?')} CPUs{gib}"


class EnginePool:
    """The engines of a run as one process uses them: connected on first use, never before.

    ``wake`` runs once per engine on its first use (the plugin: start a reaper for it, sweep
    it); ``connect`` makes a client for an engine URL with a timeout.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        build: BuildSettings,
        progress: Progress,
        say: Say,
        wake: Callable[[EngineUse], None],
        worker: str | None = None,
        connect: Connect | None = None,
    ) -> None:
        if not urls:
            raise ValueError("an engine pool needs at least one engine")
        self.urls = tuple(urls)
        self.worker = worker or current_worker()
        self.build = build
        self.progress = progress
        self.say = say
        self.wake = wake
        self._connect: Connect = connect or (lambda url, timeout: _connect(url, timeout))
        self._used: dict[str, EngineUse] = {}
        #: Engines that could not be reached when first wanted: URL → why.
        self._unreachable: dict[str, str] = {}
        #: Builders over clients of engines read from only (image donors).
        self._donors: dict[str, ImageBuilder] = {}
        self._lock = threading.RLock()

    @property
    def planned(self) -> str:
        """The engine this process boots on while it answers."""
        return planned_url(self.urls, self.worker)

    @property
    def used(self) -> list[EngineUse]:
        return list(self._used.values())

    def use(self, url: str) -> EngineUse:
        """The engine at ``url``, connected and woken on first use; raises DockerUnavailable."""
        with self._lock:
            if url in self._used:
                return self._used[url]
            client = self._connect(url, CLIENT_TIMEOUT_S)
            info = call(f"docker info of {display(url)}", client.info)
            version = call(f"docker version of {display(url)}", client.version)
            engine = EngineUse(
                url=url,
                client=client,
                builder=self._builder(client, url, donors=True),
                id=str(info.get("ID") or ""),
                cpus=int(info.get("NCPU") or 0),
                server=describe_server(info, str(version.get("Version") or "")),
            )
            self._used[url] = engine
            self.wake(engine)
            return engine

    def owner_of(self, client: object) -> EngineUse | None:
        """The engine whose client ``client`` is (None for a client made elsewhere)."""
        return next((e for e in self._used.values() if e.client is client), None)

    def pick(self) -> EngineUse:
        """The engine for the next test: this process's planned one while it answers, else
        the next one of the run that does; EngineLost when none does."""
        with self._lock:
            planned = self.planned
            order = [planned, *(u for u in self.urls if u != planned)]
            problems: list[str] = []
            for url in order:
                known = self._used.get(url)
                if known is not None and known.lost:
                    problems.append(f"{known.name}: {known.lost}")
                    continue
                if url in self._unreachable:
                    problems.append(f"{display(url)}: {self._unreachable[url]}")
                    continue
                try:
                    engine = self.use(url)
                except DockerUnavailable as exc:
                    self._unreachable[url] = exc.message
                    problems.append(f"{display(url)}: {exc.message}")
                    self.say(f"raychaos: {self.worker}: engine {display(url)} unusable: {exc}")
                    continue
                if url != planned and problems:
                    self.say(
                        f"raychaos: {self.worker} boots its next clusters on {engine.name} "
                        f"instead of {display(planned)} ({problems[0]})"
                    )
                return engine
            raise EngineLost(
                "no engine of this run answers: " + "; ".join(problems),
                hint="start the engines (`docker -H URL info` checks one) or drop the dead ones "
                "from --raychaos-docker-host",
            )

    def donors(self, url: str) -> list[ImageBuilder]:
        """Builders over the run's other engines, to carry images from (read only: no reaper,
        no sweep). Engines that do not answer are skipped."""
        found: list[ImageBuilder] = []
        with self._lock:
            for other in self.urls:
                if other == url or other in self._unreachable:
                    continue
                used = self._used.get(other)
                if used is not None:
                    if not used.lost:
                        found.append(used.builder)
                    continue
                if other not in self._donors:
                    try:
                        client = self._connect(other, DONOR_TIMEOUT_S)
                    except DockerUnavailable as exc:
                        self._unreachable[other] = exc.message
                        continue
                    self._donors[other] = self._builder(client, other, donors=False)
                found.append(self._donors[other])
        return found

    def close(self) -> None:
        with self._lock:
            clients = [e.client for e in self._used.values()]
            clients += [b.client for b in self._donors.values()]
            for client in clients:
                try:
                    client.close()
                except Exception:  # noqa: BLE001, S112 - closing a dead engine's client
                    continue

    def _builder(self, client: docker.DockerClient, url: str, *, donors: bool) -> ImageBuilder:
        from chaos.backends.docker.images import ImageBuilder

        return ImageBuilder(
            client,
            self.build,
            progress=self.progress,
            engine=display(url),
            donors=(lambda: self.donors(url)) if donors and len(self.urls) > 1 else None,
        )


def _connect(url: str, timeout: float) -> docker.DockerClient:
    return connect(timeout=timeout, url=url)
