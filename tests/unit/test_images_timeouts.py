"""Image builds are bounded: a hung pip, debootstrap, docker build or lock holder becomes one
ImageBuildError naming the step, its bound and what to try (no network, no Docker)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from chaos.backends.docker.images import (
    BuildSettings,
    ImageBuilder,
    base,
    dockerbuild,
    lock,
    transfer,
    wheelhouse,
)
from chaos.errors import ImageBuildError


class FakeImages:
    def get(self, ref: str) -> Any:
        raise docker.errors.ImageNotFound(f"no {ref}")


class FakeApi:
    def __init__(self) -> None:
        self.chunks: list[dict[str, Any]] = []
        self.raise_after: BaseException | None = None

    def build(self, **_: Any) -> Iterator[dict[str, Any]]:
        yield from self.chunks
        if self.raise_after is not None:
            raise self.raise_after


class FakeClient:
    """What ImageBuilder touches before a build step: info(), images.get(), api.build()."""

    def __init__(self) -> None:
        self.images = FakeImages()
        self.api = FakeApi()

    def info(self) -> dict[str, str]:
        return {"Architecture": "x86_64"}


def fake_tool(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tool = directory / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return tool


@pytest.fixture(autouse=True)
def no_real_debootstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that reaches debootstrap by mistake fails at once, never downloads Debian."""
    fake_tool(tmp_path / "guard", "debootstrap", "echo 'E: the real debootstrap' >&2\nexit 99\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'guard'}{os.pathsep}{os.environ['PATH']}")


def builder(tmp_path: Path, lines: list[str] | None = None, **settings: Any) -> ImageBuilder:
    sink = lines if lines is not None else []
    return ImageBuilder(
        FakeClient(),  # type: ignore[arg-type]
        BuildSettings(cache_dir=tmp_path / "cache", **settings),
        progress=sink.append,
    )


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in {"Z", "X"}


def test_a_hung_pip_download_is_killed_with_its_children_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child = tmp_path / "child.pid"
    fake_tool(tmp_path / "bin", "pip", f"sleep 60 &\necho $! > {child}\nwait\n")
    monkeypatch.setattr(wheelhouse, "PIP_DOWNLOAD_TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(ImageBuildError) as caught:
        builder(tmp_path, pip=(str(tmp_path / "bin" / "pip"),)).wheelhouse("2.60.0", "3.11")
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "pip download of ray[default,serve]==2.60.0 did not finish within 1 s" in message
    assert "PIP_DOWNLOAD_TIMEOUT_S" in message
    assert "index" in (caught.value.hint or "")
    assert "\n" not in message
    # The whole process group went, not just the direct child.
    pid = int(child.read_text())
    for _ in range(50):
        if gone(pid):
            break
        time.sleep(0.1)
    assert gone(pid), f"pip's child {pid} outlived the timeout"
    # Nothing claims the wheelhouse is complete.
    assert not list((tmp_path / "cache").rglob(".complete"))


def test_a_hung_debootstrap_is_killed_named_and_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(tmp_path / "bin", "debootstrap", "exec sleep 60\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(base, "DEBOOTSTRAP_TIMEOUT_S", 1.0)
    with pytest.raises(ImageBuildError) as caught:
        builder(tmp_path, debian_mirror="http://mirror.invalid/debian").ensure_base()
    message = str(caught.value)
    assert "debootstrap bookworm from http://mirror.invalid/debian did not finish within 1 s" in (
        message
    )
    assert "DEBOOTSTRAP_TIMEOUT_S" in message
    assert "RAYCHAOS_DEBIAN_MIRROR" in (caught.value.hint or "")
    assert not list((tmp_path / "cache").glob("raychaos-rootfs-*")), "work tree left behind"


def test_a_lock_held_by_a_live_process_is_waited_for_only_so_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_file = tmp_path / "cache" / "locks" / "raychaos_ray_2.60.0-py3.11.lock"
    lock_file.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from filelock import FileLock\n"
            "lock = FileLock(sys.argv[1])\n"  # kept referenced: a collected lock is released
            "lock.acquire()\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
            str(lock_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(lock, "LOCK_WAIT_S", 1.0)
        monkeypatch.setattr(lock, "QUIET_WAIT_S", 0.5)
        lines: list[str] = []
        started = time.monotonic()
        with (
            pytest.raises(ImageBuildError) as caught,
            builder(tmp_path, lines).locked("raychaos/ray:2.60.0-py3.11"),
        ):
            pytest.fail("the lock was taken while another process held it")
        assert 1.4 < time.monotonic() - started < 10  # quiet 0.5 s, then 1 s said
        assert "build lock of raychaos/ray:2.60.0-py3.11" in str(caught.value)
        assert "more than 1 s" in str(caught.value)
        assert "fuser" in (caught.value.hint or "")
        assert any("waiting for another process building" in line for line in lines), lines
        # The holder dies: the OS drops its lock and the next wait gets it at once.
        holder.kill()
        holder.wait(10)
        with builder(tmp_path).locked("raychaos/ray:2.60.0-py3.11"):
            pass
    finally:
        holder.kill()
        holder.wait(10)


def test_the_lock_wait_covers_the_longest_build_it_may_wait_for() -> None:
    longest = (
        transfer.TRANSFER_TIMEOUT_S
        + base.DEBOOTSTRAP_TIMEOUT_S
        + base.TAR_TIMEOUT_S
        + wheelhouse.PIP_DOWNLOAD_TIMEOUT_S
        + dockerbuild.DOCKER_BUILD_TIMEOUT_S
    )
    assert longest < lock.LOCK_WAIT_S


def test_a_docker_build_past_its_bound_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = builder(tmp_path)
    build.client.api.chunks = [{"stream": "Step 1/9 : FROM base"}]  # type: ignore[attr-defined]
    monkeypatch.setattr(dockerbuild, "DOCKER_BUILD_TIMEOUT_S", -1.0)
    with pytest.raises(ImageBuildError) as caught:
        build.docker_build("raychaos/ray:x", "recipe", path=str(tmp_path))
    assert "did not finish within -1 s (DOCKER_BUILD_TIMEOUT_S)" in str(caught.value)
    assert "Step 1/9" in (caught.value.hint or "")


def test_a_silent_daemon_during_a_build_is_one_error(tmp_path: Path) -> None:
    build = builder(tmp_path)
    build.client.api.raise_after = requests.exceptions.ReadTimeout("read timed out")  # type: ignore[attr-defined]
    with pytest.raises(ImageBuildError) as caught:
        build.docker_build("raychaos/ray:x", "recipe", path=str(tmp_path))
    assert "sent nothing" in str(caught.value)
