"""ClusterSpec/NodeSpec validation: one error naming the field, what was expected, the fix."""

from __future__ import annotations

import pytest

from chaos.errors import ChaosError, SpecError
from chaos.spec.topology import ClusterSpec, NodeSpec, load_topology, parse_size


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (1024, 1024),
        ("512m", 512 * 1024**2),
        ("2g", 2 * 1024**3),
        ("2GiB", 2 * 1024**3),
        ("1.5g", int(1.5 * 1024**3)),
        ("100MB", 100 * 1000**2),
        ("  64 mib ", 64 * 1024**2),
    ],
)
def test_sizes_parse_like_docker(raw: int | str, expected: int) -> None:
    assert parse_size(raw, "memory") == expected


@pytest.mark.parametrize("raw", ["12 parsecs", "-1", "1.2.3g", "", True, -5])
def test_bad_sizes_name_the_field_and_the_units(raw: object) -> None:
    with pytest.raises(SpecError) as info:
        parse_size(raw, "workers[0].memory")  # type: ignore[arg-type]
    assert info.value.field == "workers[0].memory"
    assert "expected" in str(info.value)


def test_default_spec_is_valid_and_names_its_nodes() -> None:
    spec = ClusterSpec().validate()
    assert spec.node_names() == ["head", "worker-1", "worker-2", "driver"]


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        (ClusterSpec(workers=(NodeSpec(num_cpus=-1),)), "workers[0].num_cpus", "≥ 0"),
        (ClusterSpec(head=NodeSpec(name="head", memory="lots")), "head.memory", "size"),
        (
            ClusterSpec(workers=(NodeSpec(memory="256m", object_store="200m"),)),
            "workers[0].object_store",
            "raise memory or lower object_store",
        ),
        (ClusterSpec(workers=(NodeSpec(object_store="10m"),)), "workers[0].object_store", "75 MiB"),
        (ClusterSpec(ray_version="2.60"), "ray_version", "--raychaos-ray-version"),
        (ClusterSpec(ray_version="latest"), "ray_version", "2.60.0"),
        (ClusterSpec(gcs_ft="etcd"), "gcs_ft", "redis"),  # type: ignore[arg-type]
        (ClusterSpec(name="Bad_Name"), "name", "DNS-safe"),
        (ClusterSpec(workers=(NodeSpec(name="head"),)), "workers[0].name", "already head"),
        (ClusterSpec(head=NodeSpec(name="head", count=2)), "head.count", "exactly 1"),
        (ClusterSpec(workers=(NodeSpec(count=-1),)), "workers[0].count", "≥ 0"),
        (ClusterSpec(workers=(NodeSpec(cpu_limit=0),)), "workers[0].cpu_limit", "> 0"),
        (ClusterSpec(env={"BAD-NAME": "1"}), "env", "environment variable"),
        (
            ClusterSpec(workers=(NodeSpec(ray_version="two"),)),
            "workers[0].ray_version",
            "2.60.0",
        ),
    ],
)
def test_invalid_specs_fail_before_any_container(
    spec: ClusterSpec, field: str, fragment: str
) -> None:
    with pytest.raises(SpecError) as info:
        spec.validate()
    assert info.value.field == field
    assert fragment in str(info.value)
    assert isinstance(info.value, ChaosError)
    assert "\n" not in str(info.value), "one line"


def test_specs_are_frozen_and_their_maps_read_only() -> None:
    node = NodeSpec(resources={"gpu_type": 1})
    with pytest.raises(AttributeError):
        node.num_cpus = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        node.resources["x"] = 1  # type: ignore[index]


def test_from_dict_accepts_worker_count_and_rejects_unknown_keys() -> None:
    spec = ClusterSpec.from_dict({"workers": 3, "gcs_ft": "redis"})
    assert spec.node_names() == ["head", "worker-1", "worker-2", "worker-3", "driver"]
    with pytest.raises(SpecError, match="wokers"):
        ClusterSpec.from_dict({"wokers": 2})
    with pytest.raises(SpecError, match="numcpus"):
        ClusterSpec.from_dict({"workers": [{"name": "w", "numcpus": 2}]})


def test_shipped_topologies_load_and_validate() -> None:
    spec = load_topology("head-2-workers")
    assert spec.validate().node_names()[0] == "head"
    with pytest.raises(SpecError, match="head-2-workers"):
        load_topology("no-such-topology")
