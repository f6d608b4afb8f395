"""Sweep decisions. A fake Docker client stands in for states a daemon cannot be put in on demand
(objects owned by a process that died, by another machine, boot or PID namespace)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from tenacity import Retrying, stop_after_delay, wait_fixed

from chaos import labels
from chaos.backends.docker import sweep as sweeping
from chaos.backends.docker.sweep import keep, kept_clusters, sweep
from chaos.cli import main

GONE_PID = 2**22 + 7  # above any pid_max: never a live process
HERE = labels.Here(
    machine="m-here",
    boot="b-now",
    pidns=labels.pid_namespace(),
    hostname="host",
    boot_time=1_000_000.0,
)


@dataclass
class FakeObject:
    name: str
    labels: dict[str, str]
    removed: bool = False
    fail: str = ""
    created: str = "1970-01-01T00:00:00Z"
    journal: list[str] | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {"Labels": self.labels, "Created": self.created, "CreatedAt": self.created}
        self.id = self.name

    def remove(self, **_: Any) -> None:
        if self.fail:
            raise RuntimeError(self.fail)
        self.removed = True
        if self.journal is not None:
            self.journal.append(self.name)


@dataclass
class FakeCollection:
    items: list[FakeObject]

    def list(self, **_: Any) -> list[FakeObject]:
        return self.items

    def prepare_model(self, attrs: dict[str, str]) -> FakeObject:
        return next(o for o in self.items if o.name == attrs["Name"])


class FakeClient:
    def __init__(
        self,
        containers: list[FakeObject],
        networks: list[FakeObject] = (),  # type: ignore[assignment]
        volumes: list[FakeObject] = (),  # type: ignore[assignment]
    ) -> None:
        self.containers = FakeCollection(list(containers))
        self.networks = FakeCollection(list(networks))
        self.volumes = FakeCollection(list(volumes))


def owned(
    pid: int = GONE_PID,
    start: str = "123",
    *,
    machine: str | None = "m-here",
    boot: str | None = "b-now",
    pidns: str | None = None,
    host: str = "host",
    cluster: str = "c1",
) -> dict[str, str]:
    found = {
        labels.RUN: "r1",
        labels.OWNER_PID: str(pid),
        labels.OWNER_START: start,
        labels.OWNER_HOST: host,
        labels.OWNER_PIDNS: labels.pid_namespace() if pidns is None else pidns,
        labels.CLUSTER: cluster,
    }
    if machine is not None:
        found[labels.OWNER_MACHINE] = machine
    if boot is not None:
        found[labels.OWNER_BOOT] = boot
    return found


def me() -> tuple[int, str]:
    return os.getpid(), labels.process_start_ticks(os.getpid())


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYCHAOS_CACHE_DIR", str(tmp_path))


# -- who is dead ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("obj_labels", "dead", "reason"),
    [
        pytest.param(owned(*me()), False, labels.OWNER_ALIVE, id="live-owner"),
        pytest.param(owned(os.getpid(), "1"), True, labels.OWNER_GONE, id="pid-reused"),
        pytest.param(owned(), True, labels.OWNER_GONE, id="pid-gone"),
        pytest.param(owned(boot="b-before"), True, labels.BOOT_ENDED, id="rebooted"),
        pytest.param(owned(machine="m-other"), False, labels.OTHER_MACHINE, id="other-machine"),
        # Same host name and the root PID namespace's id: two machines look alike but for this.
        pytest.param(
            owned(machine="m-other", boot="b-before"), False, labels.OTHER_MACHINE, id="twin-host"
        ),
        pytest.param(owned(machine=""), False, labels.OTHER_MACHINE, id="owner-without-id"),
        pytest.param(owned(boot=""), False, labels.UNKNOWN_BOOT, id="owner-without-boot"),
        pytest.param(owned(pidns="pid:[1]"), False, labels.OTHER_PIDNS, id="sandboxed"),
        pytest.param(owned(pidns=""), False, labels.UNREADABLE, id="owner-pidns-unknown"),
        pytest.param({labels.RUN: "r1"}, False, labels.NO_OWNER, id="no-owner-labels"),
        # Older raychaos (no machine/boot labels): dead only by the old rule, else kept.
        pytest.param(owned(machine=None, boot=None), True, labels.OWNER_GONE, id="legacy-dead"),
        pytest.param(
            owned(*me(), machine=None, boot=None), False, labels.OWNER_ALIVE, id="legacy-alive"
        ),
        pytest.param(
            owned(machine=None, boot=None, host="elsewhere"), False, labels.LEGACY, id="legacy-far"
        ),
        pytest.param(
            owned(machine=None, boot=None, pidns="pid:[1]"), False, labels.LEGACY, id="legacy-ns"
        ),
    ],
)
def test_an_owner_is_dead_only_when_provably_so(
    obj_labels: dict[str, str], dead: bool, reason: str
) -> None:
    assert labels.judge(obj_labels, HERE) == labels.Verdict(dead, reason)


def test_another_boot_counts_as_ended_only_for_objects_made_before_this_boot() -> None:
    before, after = HERE.boot_time - 3600, HERE.boot_time + 3600  # type: ignore[operator]
    assert labels.judge(owned(boot="b-before"), HERE, created=before).dead
    # Created while this boot runs, by a boot that is not this one: a clone with our machine id.
    verdict = labels.judge(owned(boot="b-before"), HERE, created=after)
    assert verdict == labels.Verdict(False, labels.CLONED)


def test_an_unknown_machine_or_boot_here_keeps_everything() -> None:
    blind = labels.Here(machine="", boot="", pidns="", hostname="host", boot_time=None)
    assert labels.judge(owned(machine=""), blind).reason == labels.OTHER_MACHINE
    no_boot = labels.Here(machine="m-here", boot="", pidns="", hostname="host", boot_time=None)
    assert labels.judge(owned(), no_boot).reason == labels.UNKNOWN_BOOT
    no_proc = labels.Here(machine="m-here", boot="b-now", pidns="", hostname="h", boot_time=None)
    assert labels.judge(owned(), no_proc).reason == labels.UNREADABLE


def test_an_existing_pid_whose_proc_entry_is_hidden_is_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hidepid=2 hides other users' /proc entries; absence is asked of the kernel instead."""
    monkeypatch.setattr(labels, "_stat", lambda pid: None)
    assert labels.process_state(os.getpid(), "1") == "unknown"
    assert labels.process_state(GONE_PID, "1") == "dead"
    assert labels.judge(owned(os.getpid(), "1"), HERE).reason == labels.UNREADABLE


def test_a_zombie_owner_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = labels.process_start_ticks(child.pid)
    try:
        for attempt in Retrying(stop=stop_after_delay(20), wait=wait_fixed(0.05), reraise=True):
            with attempt:
                assert (labels._stat(child.pid) or ("?",))[0] == "Z"
        assert start and labels.process_state(child.pid, start) == "dead"
    finally:
        child.wait(10)


def test_this_process_is_named_by_all_owner_labels() -> None:
    mine = labels.owner_labels()
    assert mine[labels.OWNER_PID] == str(os.getpid())
    assert mine[labels.OWNER_START] == labels.process_start_ticks(os.getpid())
    assert mine[labels.OWNER_BOOT] == labels.boot_id()
    assert mine[labels.OWNER_MACHINE] == labels.machine_id()
    assert labels.RunIdentity(run_id="r").labels(cluster="c").items() >= mine.items()


# -- what the sweep removes -----------------------------------------------------------------
def test_sweeps_dead_owners_and_counts_what_it_keeps_by_reason() -> None:
    live = FakeObject("live", owned(*me()))
    reused_pid = FakeObject("reused", owned(os.getpid(), "1"))
    dead = FakeObject("dead", owned())
    foreign = FakeObject("foreign", owned(machine="elsewhere"))
    sandboxed = FakeObject("sandboxed", owned(pidns="pid:[1]"))
    network = FakeObject("net", owned())
    volume = FakeObject("vol", owned(boot="b-before"))
    objects = [live, reused_pid, dead, foreign, sandboxed]
    report = sweep(FakeClient(objects, [network], [volume]), here=HERE)  # type: ignore[arg-type]
    removed = [o.removed for o in (*objects, network, volume)]
    assert removed == [False, True, True, False, False, True, True]
    assert report.removed == [
        "container reused",
        "container dead",
        "network net",
        "volume vol",
    ]
    assert report.kept == {
        labels.OWNER_ALIVE: 1,
        labels.OTHER_MACHINE: 1,
        labels.OTHER_PIDNS: 1,
    }
    assert "kept 3 (1 other PID namespace, 1 other machine, 1 owner alive)" in str(report)


def test_containers_go_first_in_parallel_then_networks_then_volumes() -> None:
    journal: list[str] = []
    barrier = threading.Barrier(3, timeout=10)

    class Slow(FakeObject):
        def remove(self, **kwargs: Any) -> None:
            barrier.wait()  # all three removals are in flight at once, or this times out
            super().remove(**kwargs)

    containers = [Slow(f"c{i}", owned(), journal=journal) for i in range(3)]
    network = FakeObject("n", owned(), journal=journal)
    volume = FakeObject("v", owned(), journal=journal)
    report = sweep(FakeClient(containers, [network], [volume]), here=HERE)  # type: ignore[arg-type]
    assert not report.failed
    assert sorted(journal[:3]) == ["c0", "c1", "c2"]
    assert journal[3:] == ["n", "v"]


def test_one_failed_removal_does_not_stop_the_rest_and_gone_is_fine() -> None:
    stuck = FakeObject("stuck", owned(), fail="device busy")
    other = FakeObject("other", owned())
    raced = FakeObject("raced", owned(), fail="No such container: raced")
    removing = FakeObject("removing", owned(), fail="removal of container x is already in progress")
    report = sweep(FakeClient([stuck, other, raced, removing]), here=HERE)  # type: ignore[arg-type]
    assert other.removed
    assert report.failed == ["container stuck: device busy"]
    assert report.removed == ["container other", "container raced", "container removing"]


def test_removal_calls_are_bounded() -> None:
    calls: list[dict[str, Any]] = []

    class Api:
        def _url(self, path: str, ident: str) -> str:
            return path.format(ident)

        def _delete(self, url: str, **kwargs: Any) -> str:
            calls.append({"url": url, **kwargs})
            return "response"

        def _raise_for_status(self, response: str) -> None:
            assert response == "response"

    class Model:
        id = "abc"
        name = "x"
        client = type("Client", (), {"api": Api()})()

    sweeping.remove("container", Model(), timeout=7)
    sweeping.remove("volume", Model(), timeout=7)
    assert calls == [
        {"url": "/containers/abc", "params": {"force": True, "v": True}, "timeout": 7},
        {"url": "/volumes/abc", "params": {"force": True}, "timeout": 7},
    ]


# -- kept clusters --------------------------------------------------------------------------
def kept_world(
    machine: str = "m-here", boot: str = "b-now"
) -> tuple[FakeClient, FakeObject, FakeObject, FakeObject]:
    keep("c-kept")
    pid, start = me()
    kept = FakeObject("kept", owned(pid, start, machine=machine, boot=boot, cluster="c-kept"))
    live = FakeObject("live", owned(pid, start, machine=machine, boot=boot, cluster="c-live"))
    dead = FakeObject("dead", owned(machine=machine, boot=boot, cluster="c-dead"))
    return FakeClient([kept, live, dead]), kept, live, dead


def test_kept_clusters_survive_a_sweep() -> None:
    client, kept, live, dead = kept_world()
    report = sweep(client, here=HERE)  # type: ignore[arg-type]
    assert (kept.removed, live.removed, dead.removed) == (False, False, True)
    assert report.kept[sweeping.KEPT] == 1
    assert kept_clusters() == {"c-kept"}


def test_sweep_kept_removes_only_kept_clusters_and_their_markers() -> None:
    client, kept, live, dead = kept_world()
    sweep(client, kept_only=True, here=HERE)  # type: ignore[arg-type]
    assert (kept.removed, live.removed, dead.removed) == (True, False, False)
    assert kept_clusters() == set()


def test_sweep_cluster_removes_that_cluster_only() -> None:
    client, kept, live, _ = kept_world()
    keep("c-other")
    client.containers.items = [kept]  # the engine filters by the cluster label
    sweep(client, cluster="c-kept", here=HERE)  # type: ignore[arg-type]
    assert kept.removed and not live.removed
    assert kept_clusters() == {"c-other"}


def test_sweep_all_removes_everything_live_runs_included() -> None:
    client, kept, live, dead = kept_world()
    report = sweep(client, everything=True, here=HERE)  # type: ignore[arg-type]
    assert kept.removed and live.removed and dead.removed
    assert len(report.removed) == 3
    assert kept_clusters() == set()


def test_a_marker_without_objects_is_forgotten() -> None:
    keep("c-long-gone")
    sweep(FakeClient([]), here=HERE)  # type: ignore[arg-type]
    assert kept_clusters() == set()


# -- the command ----------------------------------------------------------------------------
def test_the_command_names_removals_and_counts_keeps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, *_ = kept_world(labels.machine_id(), labels.boot_id())  # as seen from here
    monkeypatch.setattr("chaos.backends.docker.client.connect", lambda: client)
    assert main(["sweep"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "raychaos: removed container dead" in out
    assert any("kept 2 (" in line and "1 kept for inspection" in line for line in out), out
    assert main(["sweep", "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {"raychaos: removed container kept", "raychaos: removed container live"} <= set(out)


def test_the_command_fails_when_something_could_not_be_removed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = FakeClient([FakeObject("stuck", owned(), fail="device busy")])
    monkeypatch.setattr("chaos.backends.docker.client.connect", lambda: client)
    assert main(["sweep", "--all"]) == 1
    assert "could not remove container stuck: device busy" in capsys.readouterr().err


def test_sweep_options_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--all", "--kept"])
    assert "not allowed with" in capsys.readouterr().err


# -- a cluster's own teardown ---------------------------------------------------------------
def test_a_clusters_teardown_removes_its_containers_concurrently() -> None:
    from chaos.backends.docker.backend import DockerBackend

    journal: list[str] = []
    barrier = threading.Barrier(3, timeout=10)

    class Slow(FakeObject):
        def remove(self, **kwargs: Any) -> None:
            barrier.wait()  # all three in flight at once, or this times out
            super().remove(**kwargs)

    containers: list[FakeObject] = [Slow(n, owned(), journal=journal) for n in ("h", "w", "d")]
    containers.append(FakeObject("raced", owned(), fail="No such container: raced"))
    network = FakeObject("net", owned(), journal=journal)
    volume = FakeObject("vol", owned(), journal=journal)
    client = FakeClient(containers, [network], [volume])
    backend = DockerBackend(
        client,  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        identity=labels.RunIdentity(run_id="r1"),
        key="c1",
    )
    backend.network = network  # type: ignore[assignment]
    backend.volumes = ["vol"]
    assert backend.teardown() == []
    assert sorted(journal[:3]) == ["d", "h", "w"]
    assert journal[3:] == ["net", "vol"]


# -- another machine's leftovers on a shared engine: --older-than ------------------------------
NOW = "2025-06-10T12:00:00.123456789Z"  # the engine's clock (SystemTime)


class EngineClock(FakeClient):
    def info(self) -> dict[str, str]:
        return {"SystemTime": NOW}


def foreign(name: str, created: str, run: str = "r-far", **kwargs: Any) -> FakeObject:
    found = owned(machine="m-far", **kwargs)
    found[labels.RUN] = run
    return FakeObject(name, found, created=created)


def shared_engine() -> tuple[EngineClock, dict[str, FakeObject]]:
    objects = {
        # A run of a machine that is gone: everything it made is 3 days old.
        "old": foreign("old", "2025-06-07T12:00:00Z"),
        "old-net": foreign("old-net", "2025-06-07T11:59:00Z"),
        # A run of another machine that made a cluster an hour ago: all of it may be live.
        "busy-a": foreign("busy-a", "2025-06-07T12:00:00Z", run="r-busy"),
        "busy-b": foreign("busy-b", "2025-06-10T11:00:00Z", run="r-busy"),
        # An engine that does not say when it made something: its age is unknown.
        "undated": foreign("undated", "", run="r-undated"),
        # Old, but provably alive here, or kept for inspection: never removed.
        "alive": FakeObject(
            "alive", owned(*me(), cluster="c-alive"), created="2025-01-01T00:00:00Z"
        ),
    }
    client = EngineClock([o for n, o in objects.items() if n != "old-net"], [objects["old-net"]])
    return client, objects


def test_objects_of_another_machine_are_kept_without_older_than() -> None:
    client, objects = shared_engine()
    report = sweep(client, here=HERE)  # type: ignore[arg-type]
    assert not any(o.removed for o in objects.values())
    assert report.kept[labels.OTHER_MACHINE] == 5 and report.unproven == 5


def test_older_than_removes_only_runs_that_made_nothing_for_that_long() -> None:
    client, objects = shared_engine()
    report = sweep(client, here=HERE, older_than=2 * 86400)  # type: ignore[arg-type]
    removed = {n for n, o in objects.items() if o.removed}
    assert removed == {"old", "old-net"}
    assert report.removed == ["container old", "network old-net"]
    assert report.why["container old"] == "other machine; its run's newest object is 3.0 d old"
    assert report.kept == {
        "other machine, younger than 2.0 d": 2,
        f"other machine, {sweeping.AGE_UNKNOWN}": 1,
        labels.OWNER_ALIVE: 1,
    }
    # Ages are read on the engine's clock: a day later by this host's clock changes nothing.
    assert sweeping.engine_now(client) == sweeping.timestamp(NOW)  # type: ignore[arg-type]


def test_the_command_sweeps_the_engine_it_is_given_and_names_each_removal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, objects = shared_engine()
    asked: list[str | None] = []

    def connect(url: str | None = None) -> EngineClock:
        asked.append(url)
        return client

    monkeypatch.setattr("chaos.backends.docker.client.connect", connect)
    monkeypatch.setattr(labels.Here, "current", classmethod(lambda cls: HERE))
    assert main(["sweep", "--docker-host", "tcp://ci-engine:2376"]) == 0
    captured = capsys.readouterr()
    assert "raychaos: removed" not in captured.out
    hint = captured.err.strip()
    assert "5 object(s) kept because nothing here can judge their owner" in hint
    assert hint.endswith("raychaos sweep --docker-host tcp://ci-engine:2376 --older-than 2d")
    assert main(["sweep", "--docker-host", "tcp://ci-engine:2376", "--older-than", "2d"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert asked == ["tcp://ci-engine:2376", "tcp://ci-engine:2376"]
    assert (
        "raychaos: removed container old (other machine; its run's newest object is 3.0 d old)"
        in out
    )
    assert (
        "raychaos: removed network old-net (other machine; its run's newest object is 3.0 d old)"
        in out
    )
    assert not objects["busy-a"].removed and not objects["alive"].removed


def test_older_than_is_never_combined_with_the_other_modes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--all", "--older-than", "1d"])
    assert "not allowed with" in capsys.readouterr().err
