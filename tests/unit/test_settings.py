"""Option precedence (marker > CLI > env > ini) and errors that name their source."""

from __future__ import annotations

import pytest

from chaos.settings import SettingError, resolve


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
