"""Several Docker engines, without Docker: the option, which worker boots where, the pool's
fail-over, per-engine boot slots, reapers, kept markers, and images carried between engines.

The real thing (a second dockerd on this machine): tests/integration/test_engines.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import docker.errors
import pytest

from chaos import labels
from chaos.backends.docker import engines, images, reaper, sweep
from chaos.backends.docker.client import EngineLost, client_kwargs
from chaos.backends.docker.engines import EnginePool, EngineUse
from chaos.backends.docker.images import BuildSettings, ImageBuilder, carry, transfer
from chaos.cluster.boot_slots import boot_slot, engine_scope, slot_directory, slots_for_cpus
from chaos.errors import ChaosError, ClusterBootTimeout, DockerUnavailable, ImageBuildError
from chaos.plugin.settings import resolve

A, B, C = "unix:///run/a.sock", "unix:///run/b.sock", "ssh://ci@builder-3"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYCHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)


# -- the option ---------------------------------------------------------------------------------
def test_engines_come_from_the_flag_env_or_ini_as_a_list() -> None:
    assert resolve({"docker_hosts": [A, B]}, {}, {}).docker_hosts == (A, B)
    assert resolve({}, {}, {"RAYCHAOS_DOCKER_HOSTS": f"{A},{C}"}).docker_hosts == (A, C)
    settings = resolve({}, {"raychaos_docker_hosts": f"{B} {A}"}, {})
    assert settings.docker_hosts == (B, A)
    assert settings.sources["docker_hosts"] == "ini raychaos_docker_hosts"
    assert resolve({}, {}, {}).docker_hosts == ()


@pytest.mark.parametrize("bad", ["host:2376", "ftp://x", "unix://", f"{A},{A}"])
def test_a_bad_engine_is_a_usage_error_naming_the_source(bad: str) -> None:
    with pytest.raises(ValueError, match="--raychaos-docker-host \\(from env"):
        resolve({}, {}, {"RAYCHAOS_DOCKER_HOSTS": bad})


def test_without_engines_the_run_has_docker_host_or_the_local_socket() -> None:
    assert engines.engine_urls((), {}) == ("unix:///var/run/docker.sock",)
    assert engines.engine_urls((), {"DOCKER_HOST": "tcp://h:2376"}) == ("tcp://h:2376",)
    assert engines.engine_urls((A, B), {"DOCKER_HOST": "tcp://h:2376"}) == (A, B)


def test_reports_name_an_engine_by_its_url_without_a_password() -> None:
    assert engines.display(A) == A
    assert engines.display("ssh://ci@host") == "ssh://ci@host"
    assert engines.display("tcp://u:secret@host:2376") == "tcp://u@host:2376"


# -- which worker boots where -------------------------------------------------------------------
def test_worker_n_boots_on_engine_n_mod_count() -> None:
    urls = (A, B, C)
    assert [engines.planned_url(urls, f"gw{i}") for i in range(5)] == [A, B, C, A, B]
    assert engines.planned_url(urls, "main") == A
    assert engines.assignment((A, B), 3) == {A: ["gw0", "gw2"], B: ["gw1"]}
    assert engines.assignment((A, B), 0) == {A: ["main"], B: []}


# -- the pool -----------------------------------------------------------------------------------
class FakeClient:
    def __init__(self, url: str, ident: str = "", cpus: int = 4) -> None:
        self.url = url
        self.ident = ident or f"ID-{url[-6:]}"
        self.cpus = cpus
        self.closed = False

    def info(self) -> dict[str, Any]:
        return {"ID": self.ident, "NCPU": self.cpus, "MemTotal": 8 * 2**30}

    def version(self) -> dict[str, Any]:
        return {"Version": "20.10.24"}

    def close(self) -> None:
        self.closed = True


@dataclass
class World:
    """Engines that answer (or not), and what the pool asked of them."""

    down: set[str] = field(default_factory=set)
    connects: list[tuple[str, float]] = field(default_factory=list)
    woken: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)

    def connect(self, url: str, timeout: float) -> Any:
        self.connects.append((url, timeout))
        if url in self.down:
            raise DockerUnavailable(f"cannot reach the Docker daemon at {url}: refused")
        return FakeClient(url)

    def pool(self, urls: tuple[str, ...], worker: str) -> EnginePool:
        return EnginePool(
            urls,
            build=BuildSettings(),
            progress=self.said.append,
            say=self.said.append,
            wake=lambda engine: self.woken.append(engine.url),
            worker=worker,
            connect=self.connect,
        )


def test_nothing_connects_until_an_engine_is_needed() -> None:
    world = World()
    pool = world.pool((A, B), "gw1")
    assert world.connects == []
    engine = pool.pick()
    assert engine.url == B and engine.id == "ID-b.sock" and engine.cpus == 4
    assert engine.server == "Docker 20.10.24, 4 CPUs, 8.0 GiB"
    assert pool.pick() is engine
    assert world.connects == [(B, engines.CLIENT_TIMEOUT_S)]
    assert world.woken == [B]  # one reaper and one sweep per engine a process uses


def test_a_lost_engine_sends_the_next_tests_to_the_next_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = World()
    pool = world.pool((A, B), "gw1")
    first = pool.pick()
    monkeypatch.setattr(engines, "answers", lambda url, timeout: "connection refused")
    assert first.check() == "connection refused"
    assert first.lost == "connection refused"
    moved = pool.pick()
    assert moved.url == A
    assert world.woken == [B, A]
    assert any("gw1 boots its next clusters on unix:///run/a.sock" in s for s in world.said)
    error = first.lost_error("DockerUnavailable: exec true in head failed")
    assert isinstance(error, EngineLost) and isinstance(error, ChaosError)
    assert str(error).startswith(
        f"engine {B} stopped answering: connection refused; the test was at: DockerUnavailable"
    )


def test_an_engine_that_answers_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = World().pool((A,), "main").pick()
    monkeypatch.setattr(engines, "answers", lambda url, timeout: None)
    assert engine.check() is None
    assert engine.lost == ""


def test_an_engine_unreachable_from_the_start_is_skipped_and_said() -> None:
    world = World(down={A})
    pool = world.pool((A, B), "gw0")
    assert pool.pick().url == B
    assert pool.pick().url == B
    assert [u for u, _ in world.connects].count(A) == 1  # asked once, not per test
    assert any("engine unix:///run/a.sock unusable" in s for s in world.said)


def test_no_engine_answering_is_one_engine_lost_line() -> None:
    pool = World(down={A, B}).pool((A, B), "gw0")
    with pytest.raises(EngineLost) as info:
        pool.pick()
    text = str(info.value)
    assert text.startswith("no engine of this run answers: unix:///run/a.sock: cannot reach")
    assert B in text and "--raychaos-docker-host" in text


def test_donors_are_the_other_engines_read_only() -> None:
    world = World(down={C})
    pool = world.pool((A, B, C), "gw0")
    engine = pool.pick()
    assert engine.builder.donors is not None
    donors = engine.builder.donors()
    assert [d.engine for d in donors] == [B]
    assert (B, engines.DONOR_TIMEOUT_S) in world.connects
    assert world.woken == [A]  # reading images wakes nothing
    assert [d.engine for d in engine.builder.donors()] == [B]  # connected once
    assert [u for u, _ in world.connects].count(B) == 1
    pool.close()
    assert all(c.closed for c in (engine.client, donors[0].client))


def test_a_single_engine_has_no_donors() -> None:
    assert World().pool((A,), "main").pick().builder.donors is None


# -- boot slots per engine ----------------------------------------------------------------------
def test_boot_slots_are_one_per_two_cores_of_the_engine() -> None:
    assert [slots_for_cpus(n) for n in (0, 1, 2, 3, 8, 64)] == [1, 1, 1, 1, 4, 32]


def test_slot_locks_are_keyed_by_the_engine_id(tmp_path: Path) -> None:
    assert slot_directory(tmp_path, "") == tmp_path
    assert slot_directory(tmp_path, "HPN3:6LPV:SJRP") == tmp_path / "engine-HPN3-6LPV-SJRP"
    with engine_scope("E1"), boot_slot(tmp_path, 1):
        assert (tmp_path / "engine-E1" / "boot-slot-0.lock").exists()
        # Another engine's only slot is free; this engine's is taken.
        with engine_scope("E2"), boot_slot(tmp_path, 1, max_queue_s=0.5) as queued:
            assert queued < 0.5
        with (
            pytest.raises(ClusterBootTimeout, match="engine E1 kept booting"),
            boot_slot(tmp_path, 1, max_queue_s=0.5),
        ):
            pass


def test_a_scope_does_not_leak_into_other_threads(tmp_path: Path) -> None:
    seen: list[Path] = []

    def other() -> None:
        with boot_slot(tmp_path, 1, max_queue_s=5):
            seen.extend(tmp_path.glob("boot-slot-*.lock"))

    with engine_scope("E1"), boot_slot(tmp_path, 1):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(10)
    assert seen == [tmp_path / "boot-slot-0.lock"]


# -- reapers and kept markers per engine ---------------------------------------------------------
class FakePopen:
    started: ClassVar[list[list[str]]] = []

    def __init__(self, argv: list[str], **_: Any) -> None:
        FakePopen.started.append(argv)
        self.pid = 4242

    def poll(self) -> int | None:
        return None


def test_one_reaper_per_engine_a_process_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("chaos.backends.docker.reaper.subprocess.Popen", FakePopen)
    monkeypatch.setattr(reaper, "_started", {})
    FakePopen.started = []
    first = reaper.start("r1", engine=A)
    assert reaper.start("r1", engine=A) is first
    reaper.start("r1", engine=B)
    assert len(FakePopen.started) == 2
    engines_watched = [argv[argv.index("--engine") + 1] for argv in FakePopen.started]
    assert engines_watched == [A, B]
    assert reaper.check() is None


def test_a_reaper_of_another_engine_logs_apart() -> None:
    owner = {labels.OWNER_PID: "12", labels.OWNER_START: "34"}
    assert reaper._log_path(owner).name == "12-34.log"
    assert reaper._log_path(owner, engines.default_url()).name == "12-34.log"
    assert reaper._log_path(owner, B).name.startswith("12-34-")


class NoObjects:
    def list(self, **_: Any) -> list[Any]:
        return []


class EmptyEngine:
    containers = networks = volumes = NoObjects()


def test_sweeping_one_engine_keeps_the_markers_of_clusters_kept_on_another() -> None:
    sweep.keep("c-on-b", engine=B)
    sweep.keep("c-on-default")
    sweep.sweep(EmptyEngine(), engine=A)  # type: ignore[arg-type]
    assert sweep.kept_clusters() == {"c-on-b", "c-on-default"}
    sweep.sweep(EmptyEngine(), engine=B)  # type: ignore[arg-type]
    assert sweep.kept_clusters() == {"c-on-default"}
    sweep.sweep(EmptyEngine())  # type: ignore[arg-type] # DOCKER_HOST's engine
    assert sweep.kept_clusters() == set()


# -- clients ---------------------------------------------------------------------------------------
def test_tls_from_the_environment_applies_to_tcp_engines_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")
    tcp = client_kwargs("tcp://h:2376", 30)
    assert tcp["base_url"] == "tcp://h:2376"
    assert tcp["tls"].verify is True and tcp["tls"].ca_cert.endswith("ca.pem")
    assert "tls" not in client_kwargs(A, 30)
    assert client_kwargs("ssh://ci@h", 30)["use_ssh_client"] in (True, False)


# -- images carried between engines ---------------------------------------------------------------
@dataclass
class FakeImage:
    id: str
    labels: dict[str, str]


class FakeImages:
    def __init__(self, found: dict[str, FakeImage]) -> None:
        self.found = found

    def get(self, ref: str) -> FakeImage:
        if ref not in self.found:
            raise docker.errors.ImageNotFound(ref)
        return self.found[ref]


class ImageEngine:
    def __init__(self, found: dict[str, FakeImage] | None = None) -> None:
        self.images = FakeImages(dict(found or {}))


TAG = images.ray_image_tag("2.60.0", "3.11")


def _engine_with_image(tamper: bool = False) -> tuple[ImageEngine, str]:
    base = images.debian_base_tag()
    donor = ImageEngine({base: FakeImage("sha256:base", {})})
    recipe = ImageBuilder(donor).recipe_hash("2.60.0", "3.11", base)  # type: ignore[arg-type]
    donor.images.found[TAG] = FakeImage("sha256:ray", {labels.IMAGE_RECIPE: recipe})
    return donor, ("tampered" if tamper else recipe)


def _receiver(target: ImageEngine, donor: ImageEngine, said: list[str]) -> ImageBuilder:
    return ImageBuilder(
        target,  # type: ignore[arg-type]
        progress=said.append,
        engine="e2",
        donors=lambda: [ImageBuilder(donor, engine="e1")],  # type: ignore[arg-type]
    )


@pytest.fixture
def carried(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_carry(source: Any, target: Any, refs: list[str], progress: Any) -> tuple[int, float]:
        calls.append(list(refs))
        for ref in refs:
            image = source.images.get(ref)
            target.images.found[ref] = FakeImage(image.id, dict(image.labels))
        return 123 * 2**20, 4.0

    monkeypatch.setattr(transfer, "carry", fake_carry)
    return calls


def test_an_engine_without_the_image_gets_it_and_its_base_from_another(
    carried: list[list[str]],
) -> None:
    donor, recipe = _engine_with_image()
    target, said = ImageEngine(), list[str]()
    builder = _receiver(target, donor, said)
    assert images.carry_from_donors(builder, TAG, "2.60.0", "3.11")
    assert carried == [[images.debian_base_tag(), TAG]]
    assert target.images.get(TAG).labels[labels.IMAGE_RECIPE] == recipe
    assert builder.current(TAG, recipe)
    assert said[-1] == (
        f"carried {TAG} from e1 to e2: 0.12 GiB in 4 s, raychaos.recipe={recipe} checked"
    )


def test_an_engine_with_the_image_current_gets_nothing(carried: list[list[str]]) -> None:
    donor, _ = _engine_with_image()
    target = ImageEngine(dict(donor.images.found))
    assert not images.carry_from_donors(_receiver(target, donor, []), TAG, "2.60.0", "3.11")
    assert carried == []


def test_a_donor_with_a_stale_image_gives_nothing(carried: list[list[str]]) -> None:
    donor, _ = _engine_with_image()
    donor.images.found[TAG] = FakeImage("sha256:old", {labels.IMAGE_RECIPE: "old-recipe"})
    assert not images.carry_from_donors(_receiver(ImageEngine(), donor, []), TAG, "2.60.0", "3.11")
    assert carried == []


def test_a_failed_transfer_means_a_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any) -> tuple[int, float]:
        raise ImageBuildError("carrying x failed after 12 MiB: connection reset")

    monkeypatch.setattr(transfer, "carry", broken)
    donor, _ = _engine_with_image()
    said: list[str] = []
    assert not images.carry_from_donors(
        _receiver(ImageEngine(), donor, said), TAG, "2.60.0", "3.11"
    )
    assert said[-1].endswith("building it instead")


class FakeResponse:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    def iter_content(self, size: int, decode: bool) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        self.closed = True


class FakeApi:
    def __init__(self, chunks: list[bytes], answer: list[dict[str, str]]) -> None:
        self.response = FakeResponse(chunks)
        self.answer = answer
        self.received = b""
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def _url(self, path: str) -> str:
        return path

    def _raise_for_status(self, response: Any) -> None:
        return None

    def _get(self, url: str, **kwargs: Any) -> FakeResponse:
        self.asked.append((url, kwargs))
        return self.response

    def _post(self, url: str, data: Iterator[bytes], **kwargs: Any) -> str:
        self.asked.append((url, kwargs))
        self.received = b"".join(data)
        return "loaded"

    def _stream_helper(self, response: Any, decode: bool) -> Iterator[dict[str, str]]:
        yield from self.answer


@dataclass
class ApiEngine:
    api: FakeApi


def test_carry_streams_one_archive_of_every_ref_from_save_into_load() -> None:
    source = ApiEngine(FakeApi([b"abc", b"defg"], []))
    target = ApiEngine(FakeApi([], [{"stream": "Loaded image: x"}]))
    size, took = carry(source, target, ["base", "ray"])  # type: ignore[arg-type]
    assert size == 7 and took >= 0
    assert target.api.received == b"abcdefg"
    url, kwargs = source.api.asked[0]
    assert url == "/images/get" and kwargs["params"] == {"names": ["base", "ray"]}
    assert target.api.asked[0][0] == "/images/load"
    assert source.api.response.closed


def test_carry_turns_a_load_error_into_one_image_build_error() -> None:
    source = ApiEngine(FakeApi([b"abc"], []))
    target = ApiEngine(FakeApi([], [{"error": "no space left on device"}]))
    with pytest.raises(ImageBuildError, match="docker load said no space left on device"):
        carry(source, target, ["ray"])  # type: ignore[arg-type]


def test_carry_is_bounded() -> None:
    source = ApiEngine(FakeApi([b"a"] * 3, []))
    target = ApiEngine(FakeApi([], []))
    with pytest.raises(ImageBuildError, match="did not finish within -1 s"):
        carry(source, target, ["ray"], bound_s=-1)  # type: ignore[arg-type]


def test_an_engine_use_is_what_the_plugin_stashes() -> None:
    """EngineUse satisfies the Engine protocol (what the hooks and labels read)."""
    from chaos.backends.base import Engine

    use: Engine = EngineUse(A, FakeClient(A), ImageBuilder(FakeClient(A)), "id", 2, "s")  # type: ignore[arg-type]
    assert use.name == A and use.lost == ""
