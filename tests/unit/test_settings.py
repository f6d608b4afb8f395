"""Option precedence (marker > CLI > env > ini) and errors that name their source."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from chaos.plugin.settings import SettingError, resolve
from chaos.spec import releases


def test_defaults() -> None:
    settings = resolve({}, {}, env={})
    assert settings.ray_version == "2.60.0"
    assert settings.boot_timeout == 180.0
    assert settings.keep is False
    assert settings.sources["ray_versions"] == "default"
    assert settings.boot_slots == 0, "0 = auto: one booting cluster per two cores"


def test_boot_slots_from_env() -> None:
    assert resolve({}, {}, env={"RAYCHAOS_BOOT_SLOTS": "3"}).boot_slots == 3


def test_cli_beats_env_beats_ini() -> None:
    ini = {"raychaos_ray_version": "2.58.0", "raychaos_boot_timeout": "90"}
    env = {"RAYCHAOS_RAY_VERSION": "2.59.0"}
    settings = resolve({"ray_versions": ["2.60.0"]}, ini, env=env)
    assert settings.ray_version == "2.60.0"
    assert settings.sources["ray_versions"] == "--raychaos-ray-version"
    settings = resolve({}, ini, env=env)
    assert (settings.ray_version, settings.sources["ray_versions"]) == (
        "2.59.0",
        "env RAYCHAOS_RAY_VERSION",
    )
    settings = resolve({}, ini, env={})
    assert (settings.ray_version, settings.boot_timeout) == ("2.58.0", 90.0)


@pytest.mark.parametrize(
    ("cli", "ini", "env", "fragment"),
    [
        (
            {"boot_timeout": "soon"},
            {},
            {},
            "--raychaos-boot-timeout (from --raychaos-boot-timeout)",
        ),
        (
            {},
            {"raychaos_boot_timeout": "-3"},
            {},
            "(from ini raychaos_boot_timeout): expected seconds > 0",
        ),
        ({}, {}, {"RAYCHAOS_RAY_VERSION": "newest"}, "(from env RAYCHAOS_RAY_VERSION)"),
        ({}, {}, {"RAYCHAOS_KEEP": "maybe"}, "expected true or false"),
        ({"image": "bad image!"}, {}, {}, "image reference"),
        ({}, {}, {"RAYCHAOS_BOOT_SLOTS": "0"}, "expected a whole number ≥ 1 (or auto)"),
    ],
)
def test_bad_values_name_where_they_came_from(
    cli: dict[str, str], ini: dict[str, str], env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(SettingError) as info:
        resolve(cli, ini, env=env)
    assert fragment in str(info.value)


# -- a wheel of one's own ------------------------------------------------------------------
@pytest.fixture
def wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A minimal Ray wheel file (name and METADATA), no wheel provided before the test."""
    monkeypatch.setattr(releases, "_PROVIDED", {})
    path = tmp_path / "ray-2.61.0+mycorp.1-cp311-cp311-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "ray-2.61.0+mycorp.1.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: ray\nVersion: 2.61.0+mycorp.1\n",
        )
    return path


def test_a_wheel_is_the_runs_release(wheel: Path) -> None:
    settings = resolve({"ray_wheel": str(wheel)}, {}, env={})
    assert settings.ray_versions == ("2.61.0+mycorp.1",)
    assert settings.sources["ray_versions"] == "--raychaos-ray-wheel"
    assert settings.ray_wheel is not None and settings.ray_wheel.path == wheel
    assert releases.provided()["2.61.0+mycorp.1"] == settings.ray_wheel


def test_a_wheel_joins_the_releases_given(wheel: Path) -> None:
    env = {"RAYCHAOS_RAY_WHEEL": str(wheel), "RAYCHAOS_RAY_VERSION": "2.60.0"}
    assert resolve({}, {}, env=env).ray_versions == ("2.60.0", "2.61.0+mycorp.1")
    named = resolve({"ray_versions": ["2.61.0+mycorp.1"]}, {"raychaos_ray_wheel": str(wheel)})
    assert named.ray_versions == ("2.61.0+mycorp.1",), "naming the wheel's version is fine"


def test_a_path_that_is_no_ray_wheel_is_one_line(tmp_path: Path) -> None:
    other = tmp_path / "numpy-2.0.0-cp311-cp311-manylinux2014_x86_64.whl"
    other.write_bytes(b"")
    with pytest.raises(SettingError) as info:
        resolve({}, {}, env={"RAYCHAOS_RAY_WHEEL": str(other)})
    assert str(info.value) == (
        "--raychaos-ray-wheel (from env RAYCHAOS_RAY_WHEEL): expected a wheel of ray, got "
        "'numpy-2.0.0-cp311-cp311-manylinux2014_x86_64.whl' — that is a wheel of numpy"
    )
