"""Bad input gets one line: every case a user met, and any JSON-like input at all (Hypothesis).

Each case raises :class:`SpecError` naming the field, from ``from_dict`` or ``validate`` —
both run before any Docker object exists (``Cluster.__init__`` validates).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.errors import SpecError
from chaos.spec.topology import ClusterSpec, releases_available


def build(data: Any) -> ClusterSpec:
    """A spec as the plugin takes one at collection: validated, then its releases asked for."""
    return releases_available(ClusterSpec.from_dict(data).validate())


W = "workers"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({W: [{"num_cpus": math.nan}]}, "workers[0].num_cpus"),
        ({W: [{"num_cpus": math.inf}]}, "workers[0].num_cpus"),
        ({W: [{"num_cpus": 1.5}]}, "workers[0].num_cpus"),
        ({W: [{"resources": {"a": math.nan}}]}, "workers[0].resources['a']"),
        ({W: [{"resources": {"a": math.inf}}]}, "workers[0].resources['a']"),
        ({W: [{"name": "w", "count": 2}, {"name": "w-1"}]}, "workers[1].name"),
        ({"head": {"name": "driver"}}, "head.name"),
        ({"head": {"name": "redis"}}, "head.name"),
        ({"ray_version": "2.99.0"}, "ray_version"),
        ({"ray_version": "2.60.1"}, "ray_version"),
        ({W: [{"tmpfs": {"/opt/ray": "size=10m"}}]}, "workers[0].tmpfs"),
        ({W: [{"tmpfs": {"/proc": "size=10m"}}]}, "workers[0].tmpfs"),
        ({W: [{"tmpfs": {"/proc/sys/": ""}}]}, "workers[0].tmpfs"),
        ({W: [{"extra_args": "--foo=1"}]}, "workers[0].extra_args"),
        ({W: [{"labels": {"zone": "a,b"}}]}, "workers[0].labels['zone']"),
        ({W: [{"labels": {"k=v": "a"}}]}, "workers[0].labels['k=v']"),
        ({"boot_timeout_s": math.nan}, "boot_timeout_s"),
        ({"boot_timeout_s": math.inf}, "boot_timeout_s"),
        ({"boot_timeout_s": True}, "boot_timeout_s"),
        ({W: [{"count": True}]}, "workers[0].count"),
        ({"driver": "no"}, "driver"),
        ({"name": None}, "name"),
        ({"env": "RAY_x=1"}, "env"),
        ({"env": {"RAY_x": 1}}, "env['RAY_x']"),
        ({W: [{"tmpfs": ["/spill"]}]}, "workers[0].tmpfs"),
        ({"head": "big"}, "head"),
        ({W: [5]}, "workers[0]"),
        ({W: True}, "workers"),
        ({W: "two"}, "workers"),
        ({W: [{"cpu_limit": math.inf}]}, "workers[0].cpu_limit"),
        ([1, 2], "cluster"),
    ],
)
def test_each_bad_input_is_one_line_naming_its_field(data: Any, field: str) -> None:
    with pytest.raises(SpecError) as info:
        build(data)
    assert info.value.field == field, str(info.value)
    assert "\n" not in str(info.value)
    assert "expected" in str(info.value)


def test_an_unreleased_version_names_the_nearest_releases() -> None:
    with pytest.raises(SpecError) as info:
        build({"ray_version": "2.58.9"})
    assert "2.58.1" in str(info.value) and "2.59.0" in str(info.value)
    assert str(info.value).count(", ") < 8, "a few near releases, not every release"


def test_integral_float_cpus_are_whole_numbers() -> None:
    assert build({W: [{"num_cpus": 2.0}]}).workers[0].num_cpus == 2.0


# -- any input at all ------------------------------------------------------------------------
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["2.60.0", "head", "worker", "redis", "512m", "/spill", "rocksdb", "3.11"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
NODE_KEYS = st.sampled_from(
    [
        "name",
        "count",
        "num_cpus",
        "memory",
        "object_store",
        "resources",
        "labels",
        "env",
        "tmpfs",
        "extra_args",
        "cpu_limit",
        "ray_version",
        "image",
        "expect_join",
        "head_address",
    ]
)
NODE = st.dictionaries(NODE_KEYS, JSON, max_size=4)
CLUSTER = st.fixed_dictionaries(
    {},
    optional={
        "name": JSON,
        "ray_version": JSON,
        "head": NODE | JSON,
        "workers": st.lists(NODE | JSON, max_size=3) | JSON,
        "driver": JSON,
        "gcs_ft": JSON,
        "env": JSON,
        "boot_timeout_s": JSON,
        "python": JSON,
    },
)


@settings(max_examples=400, deadline=None)
@given(CLUSTER | JSON)
def test_any_input_validates_or_raises_spec_error(data: Any) -> None:
    try:
        spec = build(data)
    except SpecError as exc:
        message = str(exc)
    else:
        assert spec.validate() is spec
        return
    assert "\n" not in message


def test_a_spec_is_data_its_release_is_asked_for_only_when_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chaos.spec import releases

    def no_index(**_: Any) -> Any:
        raise AssertionError("building a spec asked the package index")

    monkeypatch.setattr(releases, "index_releases", no_index)
    spec = ClusterSpec.from_dict({"ray_version": "2.99.0"}).validate()  # written well: data
    assert spec.ray_version == "2.99.0"
    with pytest.raises(AssertionError, match="asked the package index"):
        releases_available(spec)  # collection and boot ask
