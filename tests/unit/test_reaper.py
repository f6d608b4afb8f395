"""The reaper's decisions: which objects belong to its (dead) owner, with a fake Docker client.

Its life as a process (started by the owner, watching it, removing through the engine named by
DOCKER_HOST, exiting) is in test_reaper_lifecycle.py; kill-to-gone against real clusters is
tests/integration/test_crash_matrix.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from chaos import labels
from chaos.backends.docker import reaper
from chaos.backends.docker.sweep import keep

OWNER = {
    labels.OWNER_PID: "4242",
    labels.OWNER_START: "777",
    labels.OWNER_BOOT: "boot-1",
    labels.OWNER_MACHINE: "machine-1",
    labels.OWNER_PIDNS: "pid:[4026531836]",
}


def of(owner: dict[str, str] = OWNER, cluster: str = "k1", **changes: str) -> dict[str, str]:
    found = {labels.RUN: "r1", labels.CLUSTER: cluster, labels.OWNER_HOST: "vm", **owner}
    found.update({labels.PREFIX + k.replace("_", "-"): v for k, v in changes.items()})
    return found


@dataclass
class Obj:
    name: str
    labels: dict[str, str]
    journal: list[str]
    fail: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {"Labels": self.labels}

    def remove(self, **_: Any) -> None:
        if self.fail:
            raise RuntimeError(self.fail)
        self.journal.append(self.name)


class Collection:
    def __init__(self, items: list[Obj]) -> None:
        self.items = items
        self.filters: list[Any] = []

    def list(self, **kwargs: Any) -> list[Obj]:
        self.filters.append(kwargs.get("filters"))
        return [o for o in self.items if o.name not in o.journal]


class Client:
    def __init__(self, containers: list[Obj], networks: list[Obj], volumes: list[Obj]) -> None:
        self.containers = Collection(containers)
        self.networks = Collection(networks)
        self.volumes = Collection(volumes)
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYCHAOS_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize(
    ("obj_labels", "belongs"),
    [
        pytest.param(of(), True, id="owner"),
        pytest.param(of(owner_start="778"), False, id="pid-reused-by-another-owner"),
        pytest.param(of(owner_pid="4243"), False, id="other-pid"),
        pytest.param(of(owner_boot="boot-0"), False, id="same-pid-earlier-boot"),
        pytest.param(of(owner_machine="machine-2"), False, id="same-pid-other-machine"),
        pytest.param(of(owner_pidns="pid:[1]"), False, id="same-pid-other-namespace"),
        pytest.param(of(owner_host="other-name"), True, id="host-renamed-mid-run"),
        pytest.param({labels.RUN: "r1"}, False, id="no-owner-labels"),
    ],
)
def test_an_object_belongs_to_the_owner_only_if_every_owner_label_matches(
    obj_labels: dict[str, str], belongs: bool
) -> None:
    assert reaper.belongs(obj_labels, OWNER) is belongs


def test_an_owner_not_named_exactly_owns_nothing() -> None:
    vague = {**OWNER, labels.OWNER_START: ""}
    assert not reaper.nameable(vague)
    assert not reaper.belongs(of(vague), vague)
    journal: list[str] = []
    client = Client([Obj("c", of(vague), journal)], [], [])
    assert reaper.reap_once(client, vague) == reaper.Pass()  # type: ignore[arg-type]
    assert journal == []


def test_reaps_the_owners_objects_in_order_and_nothing_else() -> None:
    journal: list[str] = []
    keep("k-kept")
    containers = [
        Obj("head", of(), journal),
        Obj("worker", of(), journal),
        Obj("kept-head", of(cluster="k-kept"), journal),
        Obj("strangers-head", of(owner_start="1"), journal),
        Obj("earlier-boot-head", of(owner_boot="boot-0"), journal),
    ]
    networks = [Obj("net", of(), journal), Obj("kept-net", of(cluster="k-kept"), journal)]
    volumes = [Obj("vol", of(), journal), Obj("strangers-vol", of(owner_pid="1"), journal)]
    client = Client(containers, networks, volumes)
    result = reaper.reap_once(client, OWNER)  # type: ignore[arg-type]
    assert sorted(journal[:2]) == ["head", "worker"]
    assert journal[2:] == ["net", "vol"]
    assert result.removed == ["container head", "container worker", "network net", "volume vol"]
    assert result.skipped_kept == 2
    # The engine is asked for this owner only (and the answer is checked again here).
    wanted = [f"{labels.OWNER_PID}=4242", f"{labels.OWNER_START}=777"]
    assert client.containers.filters == [{"label": wanted}]


def test_cleanup_looks_again_until_a_pass_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "PASS_PERIOD_S", 0.01)
    journal: list[str] = []

    class Late(Collection):
        def list(self, **kwargs: Any) -> list[Obj]:
            if journal == ["head"]:  # an engine call in flight at the owner's death lands late
                self.items.append(Obj("late", of(), journal))
            return super().list(**kwargs)

    client = Client([], [], [])
    client.containers = Late([Obj("head", of(), journal)])
    attempts: list[int] = []

    def connect() -> Client:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("engine restarting")
        return client

    said: list[str] = []
    result = reaper.cleanup(connect, OWNER, said.append, bound_s=10)  # type: ignore[arg-type]
    assert journal == ["head", "late"]
    assert result.removed == ["container head", "container late"]
    assert not result.failed
    assert len(attempts) == 2 and client.closed
    assert "removed container late" in said


def test_cleanup_gives_up_within_its_bound_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "PASS_PERIOD_S", 0.01)
    journal: list[str] = []
    client = Client([Obj("stuck", of(), journal, fail="device busy")], [], [])
    said: list[str] = []
    result = reaper.cleanup(lambda: client, OWNER, said.append, bound_s=0.3)  # type: ignore[arg-type, return-value]
    assert result.failed == ["container stuck: device busy"]
    assert result.gave_up and any(line.startswith("gave up") for line in said)


def test_cleanup_without_an_engine_gives_up_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "PASS_PERIOD_S", 0.01)

    def unreachable() -> Client:
        raise RuntimeError("cannot reach the Docker daemon")

    said: list[str] = []
    result = reaper.cleanup(unreachable, OWNER, said.append, bound_s=0.2)  # type: ignore[arg-type]
    assert "cannot reach the Docker daemon" in result.gave_up
    assert result.removed == [] and result.failed == []


def test_the_owner_is_gone_when_its_pid_ends_or_names_another_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = labels.process_start_ticks(child.pid)
        watched = reaper.Owner(child.pid, start)
        assert not watched.direct  # we are not its child: the start time decides
        assert not watched.gone()
        assert reaper.Owner(child.pid, "1").gone()  # same PID, another start: another process
    finally:
        child.kill()
        child.wait(10)
    assert watched.gone()


def test_started_by_its_owner_a_new_parent_means_the_owner_exited() -> None:
    watched = reaper.Owner(os.getppid(), labels.process_start_ticks(os.getppid()))
    assert watched.direct and not watched.gone()


def test_the_reaper_refuses_an_owner_it_cannot_name(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--owner-pid", "1", "--owner-start", "", "--owner-boot", "b", "--owner-pidns", "x"]
    assert reaper.main(flags) == 2
    assert "not named exactly" in capsys.readouterr().out
