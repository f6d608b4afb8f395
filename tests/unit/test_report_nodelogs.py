"""Every node's log for a failed test, on a fake cluster: a running node is read in place, a
down node's files are copied to one that runs, a paused one says why; nothing raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from chaos.backends.base import ExecResult
from chaos.plugin.results.nodelogs import COPY_DIR, LOG_FILES, TAIL_BYTES, node_log
from chaos.spec.plan import RAY_LOGS

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster


@dataclass
class FakeNode:
    name: str
    role: str


@dataclass
class FakeBackend:
    states: dict[str, str]
    copies: list[tuple[str, str, str, str]] = field(default_factory=list)

    def state(self, node: str) -> str:
        return self.states[node]

    def logs(self, node: str, *, tail: int, since: float | None = None) -> str:
        if node == "gone":
            raise RuntimeError("no such container")
        return f"ray start output of {node} (last {tail})"

    def copy(self, src: str, path: str, dst: str, dest_dir: str) -> None:
        if path.endswith("gcs_server.out"):
            raise RuntimeError("no such file")  # a worker has no GCS log
        self.copies.append((src, path, dst, dest_dir))


class FakeCluster:
    def __init__(self, states: dict[str, str]) -> None:
        roles = {"head": "head", "driver": "driver", "redis": "redis"}
        self.nodes = {n: FakeNode(n, roles.get(n, "worker")) for n in states}
        self.backend = FakeBackend(states)
        self.execs: list[tuple[str, list[str]]] = []

    @property
    def driver(self) -> FakeNode:
        return self.nodes["driver"]

    @property
    def head(self) -> FakeNode:
        return self.nodes["head"]

    def node(self, name: str) -> FakeNode:
        return self.nodes[name]

    def exec(self, node: str, argv: list[str], *, timeout: float = 60) -> ExecResult:
        self.execs.append((node, argv))
        return ExecResult(0, f"<{node} ran {argv[-1][:40]}>")


def _cluster(**states: str) -> tuple[FakeCluster, Cluster]:
    fake = FakeCluster(states)
    return fake, cast("Cluster", fake)


def test_a_running_node_is_read_in_place_bounded() -> None:
    fake, cluster = _cluster(head="running", driver="running", **{"worker-1": "running"})
    text = node_log(cluster, "worker-1")
    assert text.startswith("==== worker-1: host output (ray start), the last 200 lines ====")
    assert "ray start output of worker-1" in text
    [(node, argv)] = fake.execs
    assert node == "worker-1" and RAY_LOGS in argv[-1]
    assert f"tail -c {TAIL_BYTES}" in argv[-1] and all(n in argv[-1] for n in LOG_FILES)


def test_a_down_node_is_read_on_a_node_that_runs() -> None:
    fake, cluster = _cluster(head="running", driver="running", **{"worker-1": "exited"})
    text = node_log(cluster, "worker-1")
    into = f"{COPY_DIR}/worker-1"
    assert f"(the host is down: files copied to driver:{into})" in text
    copied = [path.rsplit("/", 1)[1] for _, path, _, _ in fake.backend.copies]
    assert copied == [n for n in LOG_FILES if n != "gcs_server.out"]
    assert {(src, dst, d) for src, _, dst, d in fake.backend.copies} == {
        ("worker-1", "driver", into)
    }
    assert [n for n, _ in fake.execs] == ["driver", "driver"]  # prepare the directory, read


def test_what_cannot_be_read_says_why() -> None:
    _, cluster = _cluster(head="running", driver="exited", paused="paused", gone="gone")
    assert "(Ray logs unread: the node is paused)" in node_log(cluster, "paused")
    text = node_log(cluster, "gone")
    assert "(unavailable: no such container)" in text
    assert "(Ray logs unread: the node's host is gone)" in text
    # The driver is down: its files are read on the head.
    assert "files copied to head:" in node_log(cluster, "driver")
    _, redis = _cluster(head="running", driver="running", redis="running")
    assert "Ray logs" not in node_log(redis, "redis")  # Redis has no Ray logs
