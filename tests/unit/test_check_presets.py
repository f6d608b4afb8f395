"""Knob presets are written once, in chaos.spec.knobs; named topologies refer to them by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.check import FAST_HEALTH_CHECKS, GCS_RECONNECT, PRESETS, node_death_band
from chaos.errors import SpecError
from chaos.spec import topology as spec_module
from chaos.spec.topology import load_topology, topologies_dir


@pytest.fixture
def topologies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(spec_module, "topologies_dir", lambda: tmp_path)
    return tmp_path


def write(directory: Path, name: str, data: dict[str, Any]) -> None:
    (directory / f"{name}.json").write_text(json.dumps(data))


def test_the_shipped_fast_topology_gets_its_knobs_from_the_python_preset() -> None:
    spec = load_topology("fast-health-checks")
    assert dict(spec.env) == FAST_HEALTH_CHECKS
    assert node_death_band(spec.env) == node_death_band(FAST_HEALTH_CHECKS)
    assert spec.validate().node_names() == ["head", "worker-1", "worker-2", "driver"]
    # One source: the JSON names the preset and does not spell its knobs again.
    text = (topologies_dir() / "fast-health-checks.json").read_text()
    assert "RAY_health_check" not in text and '"fast-health-checks"' in text


def test_presets_merge_in_order_and_the_topologys_own_env_wins(topologies: Path) -> None:
    write(
        topologies,
        "mixed",
        {
            "knob_presets": ["fast-health-checks", "gcs-reconnect"],
            "env": {"RAY_health_check_period_ms": "500", "OTHER": "1"},
        },
    )
    env = dict(load_topology("mixed").env)
    assert env == {
        **FAST_HEALTH_CHECKS,
        **GCS_RECONNECT,
        "RAY_health_check_period_ms": "500",
        "OTHER": "1",
    }


def test_a_topology_without_presets_is_unchanged(topologies: Path) -> None:
    write(topologies, "plain", {"workers": 1, "env": {"A": "1"}})
    spec = load_topology("plain")
    assert dict(spec.env) == {"A": "1"}
    assert spec.node_names() == ["head", "worker", "driver"]


def test_an_unknown_preset_names_the_known_ones(topologies: Path) -> None:
    write(topologies, "typo", {"knob_presets": ["fast-healthchecks"]})
    with pytest.raises(SpecError) as info:
        load_topology("typo")
    assert info.value.field == "knob_presets"
    message = str(info.value)
    assert "'fast-healthchecks'" in message
    assert ", ".join(sorted(PRESETS)) in message
    assert "fast-health-checks" in message and "gcs-reconnect" in message


@pytest.mark.parametrize("presets", ["fast-health-checks", [1], {"fast-health-checks": True}])
def test_presets_must_be_a_list_of_names(topologies: Path, presets: object) -> None:
    write(topologies, "bad", {"knob_presets": presets})
    with pytest.raises(SpecError, match="a list of preset names") as info:
        load_topology("bad")
    assert info.value.field == "knob_presets"


def test_every_preset_is_a_set_of_ray_knobs() -> None:
    assert PRESETS["fast-health-checks"] is FAST_HEALTH_CHECKS
    for name, env in PRESETS.items():
        assert env, name
        assert all(key.startswith("RAY_") and isinstance(v, str) for key, v in env.items()), name
