"""Sweep decisions. A fake Docker client stands in for states a daemon cannot be put in on demand
(objects owned by a process that died, or by another host)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

import pytest

from chaos import labels
from chaos.backends.docker.sweep import sweep


@dataclass
class FakeObject:
    name: str
    labels: dict[str, str]
    removed: bool = False
    fail: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {"Labels": self.labels}

    def remove(self, **_: Any) -> None:
        if self.fail:
            raise RuntimeError("device busy")
        self.removed = True


@dataclass
class FakeCollection:
    items: list[FakeObject]

    def list(self, **_: Any) -> list[FakeObject]:
        return self.items


class FakeClient:
    def __init__(self, containers: list[FakeObject], networks: list[FakeObject]) -> None:
        self.containers = FakeCollection(containers)
        self.networks = FakeCollection(networks)
        self.volumes = FakeCollection([])


def owned(
    pid: int, start: str, host: str | None = None, pidns: str | None = None
) -> dict[str, str]:
    return {
        labels.RUN: "r1",
        labels.OWNER_PID: str(pid),
        labels.OWNER_START: start,
        labels.OWNER_HOST: host or socket.gethostname(),
        labels.OWNER_PIDNS: labels.pid_namespace() if pidns is None else pidns,
        labels.CLUSTER: "c1",
    }


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYCHAOS_CACHE_DIR", str(tmp_path))


def test_sweeps_dead_owners_and_spares_live_and_foreign_ones() -> None:
    me = os.getpid()
    live = FakeObject("live", owned(me, labels.process_start_ticks(me)))
    reused_pid = FakeObject("reused", owned(me, "1"))  # same PID, different start: a dead run
    dead = FakeObject("dead", owned(2**22 + 7, "123"))
    foreign = FakeObject("foreign", owned(2**22 + 7, "123", host="elsewhere"))
    # Same host name, another PID namespace (a sandbox or a container): we cannot tell.
    sandboxed = FakeObject("sandboxed", owned(2**22 + 7, "123", pidns="pid:[1]"))
    network = FakeObject("net", owned(2**22 + 7, "123"))
    report = sweep(FakeClient([live, reused_pid, dead, foreign, sandboxed], [network]))  # type: ignore[arg-type]
    removed = [o.removed for o in (live, reused_pid, dead, foreign, sandboxed, network)]
    assert removed == [False, True, True, False, False, True]
    assert len(report.removed) == 3


def test_one_failed_removal_does_not_stop_the_rest() -> None:
    stuck = FakeObject("stuck", owned(2**22 + 7, "1"), fail=True)
    other = FakeObject("other", owned(2**22 + 7, "1"))
    report = sweep(FakeClient([stuck, other], []))  # type: ignore[arg-type]
    assert other.removed
    assert report.failed and "stuck" in report.failed[0]


def test_kept_clusters_survive_until_sweep_all() -> None:
    from chaos.backends.docker.sweep import keep

    keep("c1")
    kept = FakeObject("kept", owned(2**22 + 7, "1"))
    sweep(FakeClient([kept], []))  # type: ignore[arg-type]
    assert not kept.removed
    sweep(FakeClient([kept], []), everything=True)  # type: ignore[arg-type]
    assert kept.removed
