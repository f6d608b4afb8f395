"""The nemesis's promises, on a fake cluster: edge cases a real daemon will not produce on cue
(an engine that refuses, an unpause that does not take, a ``ps`` that fails)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pytest

from chaos.backends.base import ExecResult
from chaos.errors import ChaosError, FaultNotObserved, HealError, WorkloadError
from chaos.history import History
from chaos.nemesis import Degrade, Fault, Partition, PauseNode, Together
from chaos.nemesis.nemesis import Nemesis
from chaos.nemesis.network import remove_chain
from chaos.nemesis.process import pids
from chaos.spec.topology import NodeSpec

if TYPE_CHECKING:
    from chaos.backends.base import Stream
    from chaos.cluster.cluster import Cluster

Answer = Callable[[str, list[str]], ExecResult]
OK = ExecResult(0, "")


@dataclass
class FakeNode:
    name: str
    ip: str
    node_id: str | None
    spec: NodeSpec | None = None
    role: str = "worker"
    past_node_ids: list[str] = field(default_factory=list)


class FakeBackend:
    """Host states as a dict; ``pause``/``unpause`` take effect only while allowed to."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.pause_works = True
        self.unpause_works = True

    def state(self, node: str) -> str:
        return self.states.get(node, "running")

    def kill(self, node: str) -> None:
        self.calls.append(("kill", node))
        self.states[node] = "exited"

    def pause(self, node: str) -> None:
        self.calls.append(("pause", node))
        if self.pause_works:
            self.states[node] = "paused"

    def unpause(self, node: str) -> None:
        self.calls.append(("unpause", node))
        if self.unpause_works:
            self.states[node] = "running"


@dataclass
class FakeSpec:
    boot_timeout_s: float = 5.0


class FakeCluster:
    """What the nemesis may use of a cluster; every exec is logged and answered by ``answer``."""

    def __init__(self, tmpfs: Mapping[str, str] | None = None) -> None:
        self.history = History()
        self.backend = FakeBackend()
        self.spec = FakeSpec()
        spec = NodeSpec(name="worker", tmpfs=tmpfs or {})
        self.nodes = {
            name: FakeNode(name, f"10.0.0.{i + 10}", f"id-{name}", spec=spec)
            for i, name in enumerate(["head", "worker-1", "worker-2"])
        }
        self.nodes["head"].role = "head"
        self.execs: list[tuple[str, list[str]]] = []
        self.answer: Answer = lambda node, argv: OK
        self.restarted: list[str] = []

    @property
    def head(self) -> FakeNode:
        return self.nodes["head"]

    def node(self, name: str) -> FakeNode:
        return self.nodes[name]

    def exec(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self.execs.append((node, list(argv)))
        return self.answer(node, list(argv))

    def restart(self, name: str) -> None:
        self.restarted.append(name)

    def wait_ready(self, timeout: float, nodes: Sequence[FakeNode]) -> None:
        for node in nodes:
            assert node.node_id
            node.past_node_ids.append(node.node_id)
            node.node_id = f"{node.node_id}-new"

    def stream(self, node: str, argv: Sequence[str], *, source: str, bound_s: float) -> Stream:
        raise WorkloadError(f"could not start {source}")

    def kinds(self) -> list[tuple[str, str]]:
        return [(str(e.kind), str(e.get("fault"))) for e in self.history.events(source="nemesis")]


def nemesis_on(cluster: FakeCluster) -> Nemesis:
    return Nemesis(cast("Cluster", cluster))


@dataclass(eq=False)
class Recorder(Fault):
    """A user's own fault: logs its steps; ``inject``/``undo`` fail as often as told."""

    name: str
    log: list[str]
    inject_fails: bool = False
    undo_failures: int = 0
    kind = "recorder"

    @property
    def target(self) -> str:
        return self.name

    def inject(self, cluster: Cluster) -> None:
        self.log.append(f"inject {self.name}")
        if self.inject_fails:
            raise ChaosError("the engine refused")

    def verify(self, cluster: Cluster) -> None:
        self.log.append(f"verify {self.name}")

    def undo(self, cluster: Cluster) -> None:
        self.log.append(f"undo {self.name}")
        if self.undo_failures:
            self.undo_failures -= 1
            raise AssertionError(f"{self.name} still there")


# -- the runner -----------------------------------------------------------------------------
def test_a_fault_whose_inject_raises_is_registered_and_healed_at_heal_all() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    log: list[str] = []
    fault = Recorder("a", log, inject_fails=True)
    with pytest.raises(ChaosError, match="the engine refused"):
        nemesis.inject(fault)
    assert nemesis.faults == [fault]
    assert cluster.kinds() == [("inject", "recorder")]
    nemesis.heal_all()
    assert log == ["inject a", "undo a"]
    assert fault.healed
    assert cluster.kinds() == [("inject", "recorder"), ("heal", "recorder")]


def test_memory_pressure_is_registered_before_its_allocator_starts() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    with pytest.raises(WorkloadError, match="could not start pressure-worker-1"):
        nemesis.memory_pressure("worker-1", 10**6)
    (fault,) = nemesis.faults
    assert fault.kind == "memory_pressure" and fault.details == {"bytes": 10**6}
    nemesis.heal_all()  # nothing started: nothing to stop, and no error
    assert fault.healed
    assert cluster.kinds() == [("inject", "memory_pressure"), ("heal", "memory_pressure")]


def test_a_user_fault_runs_as_a_context_manager_and_strikes_once() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    log: list[str] = []
    with nemesis.inject(Recorder("a", log)) as fault:
        assert fault.injected_at == cluster.history.events("inject")[0].t
        assert not fault.healed
    assert fault.healed
    assert log == ["inject a", "verify a", "undo a"]
    assert [k for k, _ in cluster.kinds()] == ["inject", "verified", "heal"]
    with pytest.raises(ChaosError, match="already injected"):
        nemesis.inject(fault)


def test_an_effect_never_seen_is_not_observed() -> None:
    cluster = FakeCluster()
    cluster.backend.pause_works = False
    nemesis = nemesis_on(cluster)
    fault = PauseNode("worker-1")
    fault.verify_timeout_s = 0.2
    with pytest.raises(FaultNotObserved, match=r"pause_node on worker-1 .* not observed"):
        nemesis.inject(fault)
    (event,) = cluster.history.events("not_observed")
    assert event.get("target") == "worker-1"
    assert "worker-1's host is running" in event.get("error")
    assert nemesis.faults == [fault]
    nemesis.heal_all()
    assert ("unpause", "worker-1") not in cluster.backend.calls, "not paused: nothing to undo"
    assert cluster.kinds()[-1] == ("heal", "pause_node")


def test_a_failed_heal_is_recorded_retried_once_then_raised() -> None:
    cluster = FakeCluster()
    cluster.backend.unpause_works = False
    nemesis = nemesis_on(cluster)
    fault = PauseNode("worker-2")
    fault.verify_timeout_s = 0.2
    nemesis.inject(fault)
    assert cluster.backend.state("worker-2") == "paused"
    with pytest.raises(HealError, match=r"pause_node on worker-2 failed twice.*still paused"):
        fault.__exit__(None, None, None)  # what leaving `with nemesis.pause_node(...)` does
    failed = cluster.history.events("heal_failed")
    assert [e.get("attempt") for e in failed] == [1, 2]
    assert all("still paused" in e.get("error") for e in failed)
    assert not cluster.history.events("heal")
    assert cluster.backend.calls.count(("unpause", "worker-2")) == 2
    assert not fault.healed
    with pytest.raises(HealError, match="failed twice"):
        nemesis.heal_all()  # reported again, not hammered again
    assert cluster.backend.calls.count(("unpause", "worker-2")) == 2


def test_an_undo_that_fails_once_heals_on_the_retry() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    log: list[str] = []
    nemesis.inject(Recorder("a", log, undo_failures=1))
    nemesis.heal_all()
    assert log.count("undo a") == 2
    assert [k for k, _ in cluster.kinds()] == ["inject", "verified", "heal_failed", "heal"]


# -- composition ----------------------------------------------------------------------------
def test_together_strikes_in_order_and_heals_both_newest_first() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    log: list[str] = []
    both = nemesis.inject(Together(PauseNode("worker-1"), Recorder("b", log)))
    assert both.kind == "pause_node+recorder"
    assert both.target == "worker-1 & b"
    assert cluster.backend.state("worker-1") == "paused"
    (inject,) = cluster.history.events("inject")
    assert inject.get("parts") == [
        {"fault": "pause_node", "target": "worker-1"},
        {"fault": "recorder", "target": "b"},
    ]
    nemesis.heal_all()
    assert log == ["inject b", "verify b", "undo b"]
    assert cluster.backend.calls[-1] == ("unpause", "worker-1"), "the pause is undone last"
    assert cluster.backend.state("worker-1") == "running"
    assert both.healed and all(p.healed for p in both.parts)
    assert [k for k, _ in cluster.kinds()] == ["inject", "verified", "heal"]


def test_together_retries_only_the_part_whose_undo_failed() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    log: list[str] = []
    first, second = Recorder("a", log, undo_failures=1), Recorder("b", log)
    nemesis.inject(Together(first, second)).heal()
    assert [line for line in log if line.startswith("undo")] == ["undo b", "undo a", "undo a"]
    (failed,) = cluster.history.events("heal_failed")
    assert "recorder on a: a still there" in failed.get("error")
    assert first.healed and second.healed


def test_together_needs_two_faults() -> None:
    with pytest.raises(ChaosError, match="at least two"):
        Together(PauseNode("worker-1"))
    nemesis = nemesis_on(FakeCluster())
    struck = nemesis.pause_node("worker-1")
    with pytest.raises(ChaosError, match="not yet injected"):
        Together(struck, PauseNode("worker-2"))


# -- processes and hosts --------------------------------------------------------------------
PS = """\
    1 Ss   tini
   42 Sl   raylet
   43 Z    raylet
   50 Sl   gcs_server
"""


def test_pids_reads_live_processes_only() -> None:
    cluster = FakeCluster()
    cluster.answer = lambda node, argv: ExecResult(0, PS)
    assert pids(cast("Cluster", cluster), "worker-1", "raylet") == [42]
    assert pids(cast("Cluster", cluster), "worker-1", "dashboard") == []


def test_a_failed_ps_is_an_error_not_no_process() -> None:
    cluster = FakeCluster()
    cluster.answer = lambda node, argv: ExecResult(126, "OCI runtime exec failed: paused")
    nemesis = nemesis_on(cluster)
    with pytest.raises(ChaosError) as info:
        nemesis.pids("worker-2", "raylet")
    text = str(info.value)
    assert "worker-2" in text and "ps -eo pid=,stat=,comm=" in text
    assert "exited 126" in text and "OCI runtime exec failed: paused" in text
    with pytest.raises(ChaosError, match="exited 126") as raised:
        nemesis.kill_raylet("worker-2")
    assert not isinstance(raised.value, FaultNotObserved)
    assert nemesis.faults == [] and nemesis.killed_node_ids == set()
    assert not cluster.history.events()


def test_kill_raylet_kills_its_pid_and_spares_its_node_id_from_inv02() -> None:
    cluster = FakeCluster()
    killed: set[int] = set()

    def answer(node: str, argv: list[str]) -> ExecResult:
        if argv[:2] == ["kill", "-9"]:
            killed.add(int(argv[2]))
            return OK
        if argv[0] == "sh" and "/proc/42/stat" in argv[2]:
            return ExecResult(0, "gone\n" if 42 in killed else "42 (raylet) S 1 42\n")
        return ExecResult(0, PS)

    cluster.answer = answer
    nemesis = nemesis_on(cluster)
    fault = nemesis.kill_raylet("worker-1")
    assert killed == {42}
    assert fault.details == {"pid": 42} and fault.target == "worker-1:raylet"
    assert nemesis.killed_node_ids == {"id-worker-1"}
    assert cluster.history.events("inject")[0].get("pid") == 42
    fault.heal()
    (heal,) = cluster.history.events("heal")
    assert heal.get("permanent") is True


def test_a_failed_kill_is_an_error_and_the_fault_stays_registered() -> None:
    cluster = FakeCluster()
    cluster.answer = lambda node, argv: (
        ExecResult(1, "kill: (7) - No such process") if argv[0] == "kill" else OK
    )
    nemesis = nemesis_on(cluster)
    with pytest.raises(ChaosError, match=r"kill -9 7` exited 1: kill: \(7\) - No such process"):
        nemesis.kill_worker("worker-1", 7)
    assert [f.kind for f in nemesis.faults] == ["kill_worker"]


def test_kill_node_goes_through_the_backend() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    fault = nemesis.kill_node("worker-2")
    assert cluster.backend.calls == [("kill", "worker-2")]
    assert fault.permanent and fault.details == {"node_id": "id-worker-2"}
    assert nemesis.killed_node_ids == {"id-worker-2"}
    assert not cluster.execs


def test_restart_spares_the_old_id_and_records_node_back() -> None:
    cluster = FakeCluster()
    nemesis = nemesis_on(cluster)
    fault = nemesis.restart_node("worker-1")
    assert cluster.restarted == ["worker-1"]
    assert nemesis.killed_node_ids == {"id-worker-1"}
    (back,) = cluster.history.events("node_back")
    assert back.get("old_node_id") == "id-worker-1"
    assert back.get("node_id") == "id-worker-1-new"
    assert fault.details == {"old_node_id": "id-worker-1"}


# -- network --------------------------------------------------------------------------------
class FakeIptables:
    """Chains per node from the scripts run; a probe is ``closed`` while a DROP chain holds."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.chains: dict[str, dict[str, str]] = {name: {} for name in cluster.nodes}
        self.scripts: list[str] = []

    def __call__(self, node: str, argv: list[str]) -> ExecResult:
        chains = self.chains[node]
        if argv[:2] == ["sh", "-c"]:
            script = argv[2]
            self.scripts.append(script)
            if script.startswith("tc qdisc add dev lo"):
                return ExecResult(2, "Error: Specified qdisc kind is unknown.")
            for name in re.findall(r"iptables -N (\S+)", script):
                chains[name] = script
            for name in re.findall(r"iptables -X (\S+)", script):
                chains.pop(name, None)
            return OK
        if argv == ["iptables", "-S"]:
            return ExecResult(0, "".join(f"-N {c}\n-A INPUT -j {c}\n" for c in chains))
        if argv[:2] == ["iptables", "-S"]:
            return ExecResult(0, chains.get(argv[2], ""))
        if argv[0] == "ss":
            return ExecResult(0, "LISTEN 0 128 0.0.0.0:6379 0.0.0.0:*\n")
        if argv[0] == "python3":
            cut = any("-s " in s for chains in self.chains.values() for s in chains.values())
            return ExecResult(0, "closed\n" if cut else "open\n")
        return ExecResult(1, f"unexpected {argv}")


def test_each_iptables_fault_owns_its_chain() -> None:
    cluster = FakeCluster()
    iptables = FakeIptables(cluster)
    cluster.answer = iptables
    nemesis = nemesis_on(cluster)
    lossy = nemesis.degrade("worker-1", loss_pct=30)
    cut = nemesis.partition([["worker-1"], ["head", "worker-2"]])
    assert lossy.chain.startswith("RAYCHAOS-") and cut.chain.startswith("RAYCHAOS-")
    assert lossy.chain != cut.chain
    assert set(iptables.chains["worker-1"]) == {lossy.chain, cut.chain}
    assert cluster.history.events("inject")[1].get("chain") == cut.chain
    before = len(iptables.scripts)
    cut.heal()
    assert set(iptables.chains["worker-1"]) == {lossy.chain}, "the degrade's rule survives"
    assert not any(lossy.chain in s for s in iptables.scripts[before:])
    lossy.heal()
    assert not any(iptables.chains.values())
    assert [k for k, _ in cluster.kinds()].count("heal") == 2


def test_removing_a_chain_ignores_a_longer_name_and_sees_its_own() -> None:
    cluster = FakeCluster()
    listed = "-P INPUT ACCEPT\n-N RAYCHAOS-10\n-A INPUT -j RAYCHAOS-10\n"
    cluster.answer = lambda node, argv: ExecResult(0, listed if argv == ["iptables", "-S"] else "")
    remove_chain(cast("Cluster", cluster), "worker-1", "RAYCHAOS-1")  # another fault's chain
    with pytest.raises(AssertionError, match="RAYCHAOS-10 still in worker-1"):
        remove_chain(cast("Cluster", cluster), "worker-1", "RAYCHAOS-10")


def test_removing_a_chain_on_a_stopped_host_needs_no_exec() -> None:
    cluster = FakeCluster()
    cluster.backend.states["worker-1"] = "exited"
    remove_chain(cast("Cluster", cluster), "worker-1", "RAYCHAOS-1")
    assert cluster.execs == []


def test_a_partition_whose_traffic_still_flows_is_not_observed() -> None:
    cluster = FakeCluster()
    iptables = FakeIptables(cluster)
    cluster.answer = lambda node, argv: (
        ExecResult(0, "open\n") if argv[0] == "python3" else iptables(node, argv)
    )
    nemesis = nemesis_on(cluster)
    cut = Partition([["worker-1"], ["worker-2"]])
    cut.verify_timeout_s = 0.2
    with pytest.raises(FaultNotObserved, match="worker-1 → worker-2: traffic still flows"):
        nemesis.inject(cut)
    nemesis.heal_all()
    assert not any(iptables.chains.values())


def test_degrade_refuses_delay_without_netem_before_any_effect() -> None:
    cluster = FakeCluster()
    cluster.answer = FakeIptables(cluster)
    nemesis = nemesis_on(cluster)
    with pytest.raises(ChaosError, match="needs tc netem"):
        nemesis.inject(Degrade("worker-1", delay_ms=100))
    assert nemesis.faults == [] and not cluster.history.events()
    with pytest.raises(ChaosError, match="delay_ms > 0 or loss_pct > 0"):
        Degrade("worker-1")


# -- resources ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/dev/shm", "/scratchy", "/scratch/../etc", "scratch", "/"])
def test_fill_disk_outside_a_declared_tmpfs_is_refused_before_any_exec(path: str) -> None:
    cluster = FakeCluster(tmpfs={"/scratch": "size=64m"})
    nemesis = nemesis_on(cluster)
    with pytest.raises(ChaosError, match=r"not under a tmpfs its spec declares \(/scratch\)") as e:
        nemesis.fill_disk("worker-1", path, 0.9)
    assert e.value.hint and "Docker host" in e.value.hint
    assert cluster.execs == [] and nemesis.faults == [] and not cluster.history.events()


def test_fill_disk_without_any_declared_tmpfs_is_refused() -> None:
    cluster = FakeCluster()
    with pytest.raises(ChaosError, match="none declared"):
        nemesis_on(cluster).fill_disk("worker-1", "/tmp", 0.5)
    assert cluster.execs == []


def test_fill_disk_under_a_declared_tmpfs_fills_then_frees_it() -> None:
    cluster = FakeCluster(tmpfs={"/scratch": "size=64m"})
    size, files = 1000, dict[str, int]()

    def answer(node: str, argv: list[str]) -> ExecResult:
        if argv[0] == "stat":
            return ExecResult(0, "tmpfs\n")
        if argv[0] == "df":
            return ExecResult(0, f"size used\n{size} {100 + sum(files.values())}\n")
        if argv[0] == "fallocate":
            files[argv[3]] = int(argv[2])
            return OK
        if argv[0] == "rm":
            files.pop(argv[2], None)
            return OK
        if argv[0] == "sh":  # test -e
            return ExecResult(0, "left\n" if any(f in argv[2] for f in files) else "")
        return ExecResult(1, f"unexpected {argv}")

    cluster.answer = answer
    with nemesis_on(cluster).fill_disk("worker-1", "/scratch/sub/", 0.9) as fault:
        assert fault.path == "/scratch/sub"
        assert files == {fault.file: 800}
        assert fault.file.startswith("/scratch/sub/.raychaos-fill-")
    assert files == {}
    assert [k for k, _ in cluster.kinds()] == ["inject", "verified", "heal"]


def test_fill_disk_refuses_a_path_that_is_not_tmpfs_underneath() -> None:
    cluster = FakeCluster(tmpfs={"/scratch": "size=64m"})
    cluster.answer = lambda node, argv: ExecResult(0, "ext2/ext3\n")
    with pytest.raises(ChaosError, match="on ext2/ext3, not tmpfs"):
        nemesis_on(cluster).fill_disk("worker-1", "/scratch/link", 0.5)
    assert [argv[0] for _, argv in cluster.execs] == ["stat"]
