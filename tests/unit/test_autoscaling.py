"""Autoscaling specs, the config the head reads, the watcher's parser and the bridge's rules."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from chaos.backends.base import ExecResult
from chaos.cluster.autoscaler import AutoscalerBridge
from chaos.errors import SpecError
from chaos.history import History
from chaos.spec.autoscaling import (
    HEAD_ID,
    PROVIDER_MODULE,
    Autoscaling,
    NodeType,
    cluster_config,
    head_env,
)
from chaos.spec.plan import plan_cluster
from chaos.spec.topology import ClusterSpec

AUTOSCALING = {"node_types": [{"name": "cpu", "max_workers": 2}], "max_workers": 2}


def spec(**autoscaling: Any) -> ClusterSpec:
    return ClusterSpec.from_dict(
        {"workers": 0, "driver": False, "autoscaling": {**AUTOSCALING, **autoscaling}}
    ).validate()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"node_types": []}, "autoscaling.node_types"),
        ({"node_types": [{"name": "Bad_Name"}]}, "autoscaling.node_types[0].name"),
        ({"node_types": [{"name": "averyveryverylongname"}]}, "autoscaling.node_types[0].name"),
        (
            {"node_types": [{"name": "cpu", "min_workers": 3, "max_workers": 2}]},
            "autoscaling.node_types[0].min_workers",
        ),
        ({"node_types": [{"name": "a"}, {"name": "a"}]}, "autoscaling.node_types[1].name"),
        (
            {"node_types": [{"name": "a", "min_workers": 2}], "max_workers": 1},
            "autoscaling.max_workers",
        ),
        ({"version": "v3"}, "autoscaling.version"),
        ({"update_interval_s": 0}, "autoscaling.update_interval_s"),
        ({"idle_timeout_minutes": -1}, "autoscaling.idle_timeout_minutes"),
    ],
)
def test_bad_settings_are_one_line_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec(**change)
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


def test_unknown_keys_and_a_type_named_like_a_node_are_refused() -> None:
    with pytest.raises(SpecError, match="keys among"):
        spec(node_types=[{"name": "cpu", "cpus": 1}])
    with pytest.raises(SpecError, match="keys among"):
        spec(speed=2)
    with pytest.raises(SpecError, match="apart from every node"):
        ClusterSpec.from_dict(
            {"workers": [{"name": "cpu-1"}], "autoscaling": AUTOSCALING}
        ).validate()


def test_the_config_states_every_key_and_names_ray_s_provider_class() -> None:
    settings = Autoscaling(
        node_types=(NodeType("cpu", num_cpus=2, resources={"x": 1}, labels={"k": "v"}),),
        max_workers=3,
        idle_timeout_minutes=0.1,
        upscaling_speed=0.5,
    )
    config = cluster_config(settings, cluster_name="c", head_cpus=0)
    assert config["provider"]["type"] == "external"
    assert config["provider"]["module"] == PROVIDER_MODULE
    assert config["provider"]["disable_node_updaters"] is True
    assert config["max_workers"] == 3
    assert config["idle_timeout_minutes"] == 0.1
    assert config["upscaling_speed"] == 0.5
    cpu = config["available_node_types"]["cpu"]
    assert cpu["resources"] == {"CPU": 2.0, "x": 1.0}
    assert cpu["labels"] == {"k": "v"}
    assert config["available_node_types"]["ray.head.default"]["max_workers"] == 0
    # Every key Ray's example config has, so no default is merged in from elsewhere.
    for key in ("head_start_ray_commands", "worker_start_ray_commands", "file_mounts", "docker"):
        assert key in config


def test_v2_gives_the_head_its_instance_id_and_type() -> None:
    assert "RAY_enable_autoscaler_v2" not in head_env(Autoscaling())
    env = head_env(Autoscaling(version="v2"))
    assert env["RAY_enable_autoscaler_v2"] == "1"
    assert env["RAY_CLOUD_INSTANCE_ID"] == HEAD_ID
    assert env["RAY_FAKE_CLUSTER"] == "1"


def test_the_head_gets_the_config_the_marker_and_a_running_status_before_it_starts() -> None:
    import ipaddress

    plan = plan_cluster(
        spec(),
        subnet=ipaddress.IPv4Network("10.9.0.0/24"),
        image_for=lambda n: ("2.60.0", "img"),
    )
    head = plan.node("head")
    assert any(a.startswith("--autoscaling-config=") for a in head.argv)
    assert head.env["RAY_OVERRIDE_NODE_ID_FOR_TESTING"] == HEAD_ID
    status = json.loads(head.files["/raychaos/autoscaler/status.json"])
    assert status[HEAD_ID]["State"] == "running"
    assert status[HEAD_ID]["IP"] == plan.head_ip
    assert "/raychaos/autoscaler/.in_docker" in head.files


def test_the_watcher_reads_workers_and_skips_the_head_and_half_written_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Path(__file__).resolve().parents[2] / "chaos" / "agent"
    monkeypatch.syspath_prepend(str(agent))  # as in a node: the agent is a top-level package
    from raychaos_agent.autoscale import wanted  # type: ignore[import-not-found]

    path = tmp_path / "nodes.json"
    nodes = {
        HEAD_ID: {"tags": {"ray-node-type": "head", "ray-user-node-type": "ray.head.default"}},
        "f1": {"tags": {"ray-node-type": "worker", "ray-user-node-type": "cpu"}},
    }
    path.write_text(json.dumps(nodes))
    assert wanted(str(path)) == {"f1": "cpu"}
    path.write_text(json.dumps(nodes)[:40])
    assert wanted(str(path)) is None
    assert wanted(str(tmp_path / "absent.json")) is None


# -- the bridge, on a fake cluster (the real one is exercised by experiments/test_autoscale.py)


class FakeNode:
    def __init__(self, name: str, ip: str) -> None:
        self.name, self.ip = name, ip
        self.node_id: str | None = None

    def set_node_id(self, node_id: str) -> None:
        self.node_id = node_id


class FakeBackend:
    def __init__(self) -> None:
        #: Node name → what its ``ray start`` printed last (the node entry's last line).
        self.start_logs: dict[str, str] = {}

    def state(self, node: str) -> str:
        return "running"

    def logs(self, node: str, *, tail: int, since: float | None = None) -> str:
        return self.start_logs.get(node, "")


class FakeCluster:
    def __init__(self) -> None:
        self.history = History()
        self.head = FakeNode("head", "10.0.0.10")
        self.nodes: dict[str, FakeNode] = {"head": self.head}
        self.backend = FakeBackend()
        self.retired: list[str] = []
        self.restarted: list[str] = []
        self.statuses: list[dict[str, Any]] = []

    def log_since(self, name: str) -> float | None:
        return None

    def restart(self, name: str) -> None:
        self.restarted.append(name)

    def add_node(self, spec: Any, wait: bool) -> list[FakeNode]:
        node = FakeNode(spec.name, f"10.0.0.{20 + len(self.nodes)}")
        self.nodes[node.name] = node
        return [node]

    def retire(self, name: str) -> None:
        self.retired.append(name)
        del self.nodes[name]

    def node(self, name: str) -> FakeNode:
        return self.nodes[name]

    def exec(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self.statuses.append(json.loads(argv[-1]))
        return ExecResult(0, "")


def bridge(types: Sequence[NodeType], max_workers: int) -> tuple[AutoscalerBridge, FakeCluster]:
    cluster = FakeCluster()
    settings = Autoscaling(node_types=tuple(types), max_workers=max_workers)
    return AutoscalerBridge(cluster, settings), cluster  # type: ignore[arg-type]


def wish(bridge: AutoscalerBridge, nodes: dict[str, str]) -> None:
    bridge.wanted = lambda: nodes  # type: ignore[method-assign]
    bridge.step()


def test_requests_within_the_caps_are_launched_and_reported_running() -> None:
    b, cluster = bridge([NodeType("cpu", max_workers=2)], max_workers=2)
    wish(b, {"f1": "cpu", "f2": "cpu"})
    assert sorted(b.launched.values()) == ["cpu-1", "cpu-2"]
    assert cluster.nodes["cpu-1"].node_id == "f1"
    status = cluster.statuses[-1]
    assert status["f1"]["State"] == "running"
    assert status["f1"]["IP"] == cluster.nodes["cpu-1"].ip
    assert status[HEAD_ID]["State"] == "running"


def test_requests_over_a_cap_or_of_an_unknown_type_or_for_the_head_are_refused_once() -> None:
    b, cluster = bridge([NodeType("cpu", max_workers=1), NodeType("gpu", max_workers=2)], 2)
    wish(b, {"f1": "cpu", "f2": "cpu", "f3": "tpu", HEAD_ID: "cpu"})
    reasons = {e.get("node_id"): e.get("reason") for e in cluster.history.events()}
    assert "max_workers 1" in reasons["f2"]
    assert "unknown node type 'tpu'" in reasons["f3"]
    assert "head" in reasons[HEAD_ID]
    wish(b, {"f1": "cpu", "f2": "cpu", "f3": "tpu"})
    refused = [e for e in cluster.history.events() if e.kind == "autoscaler_refused"]
    assert len(refused) == 3, "each request is refused once"
    wish(b, {"f1": "cpu", "f4": "gpu", "f5": "gpu"})
    assert "the cluster would exceed its max_workers 2" in str(refused + cluster.history.events())


def test_a_swap_within_the_caps_removes_first_then_launches() -> None:
    b, cluster = bridge([NodeType("a", max_workers=1), NodeType("b", max_workers=2)], 2)
    wish(b, {"f1": "b", "f2": "b"})
    wish(b, {"f1": "b", "f3": "a"})
    assert cluster.retired == ["b-2"]
    assert sorted(b.launched.values()) == ["a-3", "b-1"]
    assert not [e for e in cluster.history.events() if e.kind == "autoscaler_refused"]


def test_a_launched_node_whose_ray_start_died_is_started_again_twice_at_most() -> None:
    b, cluster = bridge([NodeType("cpu", max_workers=2)], 2)
    wish(b, {"f1": "cpu", "f2": "cpu"})
    cluster.backend.start_logs = {
        "cpu-1": "raychaos: ray start exited with 0",
        "cpu-2": "raychaos: ray start exited with 1",
    }
    for _ in range(4):
        wish(b, {"f1": "cpu", "f2": "cpu"})
    assert cluster.restarted == ["cpu-2", "cpu-2"]
    retried = [e for e in cluster.history.events() if e.kind == "node_start_retried"]
    assert [e.get("attempt") for e in retried] == [1, 2]
    assert retried[0].get("why") == "ray start exited with 1"
