"""Where packages come from: RAYCHAOS_DEBIAN_MIRROR reaches debootstrap; pip's own index
configuration (PIP_INDEX_URL, pip.conf) reaches `pip download` untouched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from chaos.backends.docker import images
from chaos.backends.docker.images import BuildSettings, ImageBuilder
from chaos.errors import ImageBuildError


class RecordingImages:
    """No image is present; remembers what was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def get(self, ref: str) -> Any:
        import docker.errors

        self.asked.append(ref)
        raise docker.errors.ImageNotFound(f"no {ref}")


class FakeClient:
    def __init__(self) -> None:
        self.images = RecordingImages()

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


def test_the_mirror_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYCHAOS_DEBIAN_MIRROR", " http://mirror.example/debian ")
    assert BuildSettings().debian_mirror == "http://mirror.example/debian"
    monkeypatch.setenv("RAYCHAOS_DEBIAN_MIRROR", "")
    assert BuildSettings().debian_mirror == images.DEFAULT_MIRROR
    monkeypatch.delenv("RAYCHAOS_DEBIAN_MIRROR")
    assert BuildSettings().debian_mirror == "http://deb.debian.org/debian"


def test_debootstrap_gets_the_mirror_and_the_tag_does_not_depend_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "argv"
    fake_tool(tmp_path / "bin", "debootstrap", f'echo "$@" > {record}\necho E: boom >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    tags = []
    for mirror in ("http://mirror.example/debian", images.DEFAULT_MIRROR):
        monkeypatch.setenv("RAYCHAOS_DEBIAN_MIRROR", mirror)
        client = FakeClient()
        builder = ImageBuilder(
            client,  # type: ignore[arg-type]
            BuildSettings(cache_dir=tmp_path / "cache"),
            progress=lambda _: None,
        )
        with pytest.raises(ImageBuildError) as caught:
            builder.ensure_base()
        assert record.read_text().split()[-1] == mirror
        assert "debootstrap bookworm failed (exit 1): E: boom" in str(caught.value)
        assert "RAYCHAOS_DEBIAN_MIRROR" in (caught.value.hint or "")
        tags.append(client.images.asked[0])
    assert tags[0] == tags[1]
    assert tags[0].startswith("raychaos/base:bookworm-")


def test_pip_download_leaves_the_index_to_pips_own_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "pip-call"
    fake_tool(
        tmp_path / "bin",
        "pip",
        f'printf "%s\\n" "$@" > {record}.argv\nprintenv PIP_INDEX_URL > {record}.index\n',
    )
    monkeypatch.setenv("PIP_INDEX_URL", "http://index.example/simple")
    builder = ImageBuilder(
        FakeClient(),  # type: ignore[arg-type]
        BuildSettings(cache_dir=tmp_path / "cache", pip=(str(tmp_path / "bin" / "pip"),)),
        progress=lambda _: None,
    )
    target = builder.wheelhouse("2.60.0", "3.11")
    assert (target / ".complete").exists()
    argv = Path(f"{record}.argv").read_text().split("\n")
    assert argv[0] == "download"
    overriding = {"-i", "--index-url", "--extra-index-url", "--no-index", "--isolated"}
    assert not overriding & set(argv), argv
    assert not [a for a in argv if a.startswith(("--index-url=", "--extra-index-url="))]
    assert Path(f"{record}.index").read_text().strip() == "http://index.example/simple"
