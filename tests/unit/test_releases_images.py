"""A wheel of one's own reaches the image build: its wheelhouse, its tag, its recipe hash."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.backends.docker.images import BuildSettings, ImageBuilder, node_image_tag
from chaos.errors import ImageBuildError
from chaos.spec import releases


def make_wheel(directory: Path, version: str, platform: str = "manylinux2014_x86_64") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"ray-{version}-cp311-cp311-{platform}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            f"ray-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: ray\nVersion: {version}\n",
        )
    return path


class FakeClient:
    """An x86_64 engine whose every image has the id ``sha256:base``."""

    def __init__(self) -> None:
        self.images = SimpleNamespace(get=lambda ref: SimpleNamespace(id="sha256:base"))

    def info(self) -> dict[str, str]:
        return {"Architecture": "x86_64"}


def builder(tmp_path: Path, wheels: dict[str, releases.RayWheel], pip: Path) -> ImageBuilder:
    client: Any = FakeClient()
    settings = BuildSettings(cache_dir=tmp_path / "cache", pip=(str(pip),), wheels=wheels)
    return ImageBuilder(client, settings, progress=lambda _: None)


@pytest.fixture
def pip(tmp_path: Path) -> Path:
    """A pip that records its arguments, one a line."""
    tool = tmp_path / "bin" / "pip"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "argv"}\n')
    tool.chmod(0o755)
    return tool


def test_a_wheels_image_is_tagged_with_its_hash(tmp_path: Path) -> None:
    wheel = releases.read_wheel(make_wheel(tmp_path, "2.61.0+mycorp.1"), "w")
    short = hashlib.sha256(wheel.path.read_bytes()).hexdigest()[:12]
    tag = node_image_tag("2.61.0+mycorp.1", "3.11", {wheel.version: wheel})
    assert tag == f"raychaos/ray:2.61.0_mycorp.1-wheel-{short}-py3.11"
    assert node_image_tag("2.61.0rc1", "3.11", {}) == "raychaos/ray:2.61.0rc1-py3.11"


def test_the_wheelhouse_is_made_from_the_wheel(tmp_path: Path, pip: Path) -> None:
    wheel = releases.read_wheel(make_wheel(tmp_path, "2.61.0.dev0"), "w")
    target = builder(tmp_path, {wheel.version: wheel}, pip).wheelhouse("2.61.0.dev0", "3.11")
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[0] == "download" and argv[-1] == f"{wheel.path}[default,serve]"
    assert "--only-binary=:all:" in argv and "manylinux2014_x86_64" in argv
    assert target.name == f"ray-2.61.0.dev0-wheel-{wheel.short}-default-serve-py3.11-x86_64"
    plain = builder(tmp_path, {}, pip).wheelhouse("2.61.0.dev0", "3.11")
    assert plain.name == "ray-2.61.0.dev0-default-serve-py3.11-x86_64", (
        "the release's wheelhouse is another"
    )
    assert (tmp_path / "argv").read_text().splitlines()[-1] == "ray[default,serve]==2.61.0.dev0"


def test_a_wheel_for_another_architecture_is_one_line(tmp_path: Path, pip: Path) -> None:
    wheel = releases.read_wheel(make_wheel(tmp_path, "2.61.0", "manylinux2014_aarch64"), "w")
    with pytest.raises(ImageBuildError) as info:
        builder(tmp_path, {wheel.version: wheel}, pip).wheelhouse("2.61.0", "3.11")
    assert str(info.value).startswith(
        "ray-2.61.0-cp311-cp311-manylinux2014_aarch64.whl is for aarch64; this engine runs x86_64"
    )


def test_the_recipe_hash_holds_the_wheels_hash(tmp_path: Path, pip: Path) -> None:
    one = releases.read_wheel(make_wheel(tmp_path / "a", "2.60.0"), "w")
    other_path = make_wheel(tmp_path / "b", "2.60.0")
    with zipfile.ZipFile(other_path, "a") as archive:
        archive.writestr("ray/patched.py", "PATCHED = True\n")
    other = releases.read_wheel(other_path, "w")
    hashes = {
        builder(tmp_path, wheels, pip).recipe_hash("2.60.0", "3.11", "base")
        for wheels in ({}, {"2.60.0": one}, {"2.60.0": other})
    }
    assert len(hashes) == 3, "the release, and each build of it, are different recipes"


def test_build_settings_default_to_the_wheels_this_process_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(releases, "_PROVIDED", {})
    wheel = releases.read_wheel(make_wheel(tmp_path / "w", "2.61.0rc1"), "w")
    assert dict(BuildSettings().wheels) == {}
    releases.provide(wheel)
    assert dict(BuildSettings().wheels) == {"2.61.0rc1": wheel}
    assert node_image_tag("2.61.0rc1", "3.11").endswith(f"-wheel-{wheel.short}-py3.11")
