"""The host's verdict: CPU stalls read, judged over stretches, and carried by a crash result."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from chaos.backends.docker.pressure import parse_stall_total, pressure_file
from chaos.check.stalls import (
    BOOT_STRETCH_S,
    STALLED_FRACTION,
    Stall,
    boot_stall,
    longest_silence,
    material,
    stall_steps,
    stalls,
    worst_in,
    worst_stretch,
)
from chaos.cluster.readiness import too_busy_to_boot
from chaos.errors import ClusterBootTimeout, HostTooBusy
from chaos.history import Event, History, Kind
from chaos.plugin.results.crash import CRASH_FACTS, Replay, crash_result

PSI = (
    "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0 avg60=0 avg300=0 total=9\n"
)


def too_busy(events: list[Event], start: float, end: float) -> Stall | None:
    """The experiment's verdict over one judged window."""
    worst = worst_in(events, [(start, end)])
    return worst if material(worst) else None


def _events(per_second: dict[str, list[float]], t0: float = 1000.0) -> list[Event]:
    """cpu_stall events: each node's stall *per second* given, accumulated as PSI counts."""
    totals = dict.fromkeys(per_second, 0.0)
    found = [Event(t0, "harness", Kind.CPU_STALL, {"stalled": dict(totals)})]
    for i in range(len(next(iter(per_second.values())))):
        for node, seconds in per_second.items():
            totals[node] += seconds[i]
        found.append(Event(t0 + i + 1, "harness", Kind.CPU_STALL, {"stalled": dict(totals)}))
    return found


def test_the_full_line_gives_seconds_and_some_only_without_it() -> None:
    assert parse_stall_total(PSI) == 9e-6
    assert parse_stall_total("some avg10=1.00 total=2500000\n") == 2.5
    assert parse_stall_total("some avg10=1.00\n") is None
    assert parse_stall_total("") is None


def test_a_pressure_file_must_be_the_containers_own(tmp_path: Path) -> None:
    cid = "e6745874babd" + "0" * 52
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(f"1:cpu:/docker/{cid}\n0::/docker/{cid}\n")
    # The file is looked for under the host's unified roots; none exist under tmp_path's
    # names, so the pid's cgroup is right but no file is found: None, never a guess.
    assert pressure_file(42, cid, proc) is None
    # Another container's id (a remote engine's pid that means something else here): None.
    assert pressure_file(42, "f" * 64, proc) is None
    assert pressure_file(7, cid, proc) is None  # no such process


def test_a_quiet_window_is_judged_and_a_stalled_stretch_is_not() -> None:
    quiet = _events({"head": [0.1] * 20, "worker-1": [0.2] * 20})
    assert too_busy(quiet, 1000, 1020) is None
    worst = stalls(quiet, 1000, 1020)
    assert [s.node for s in worst] == ["worker-1", "head"]
    assert abs(worst[0].fraction - 0.2) < 1e-9
    # Four seconds of a starved worker-1 inside a quiet 20 s window: averaged over the
    # window it is 0.34, over its worst 5 s stretch 0.8 — the stretch decides.
    busy = _events({"head": [0.1] * 20, "worker-1": [0.2] * 8 + [1.0] * 4 + [0.2] * 8})
    stall = too_busy(busy, 1000, 1020)
    assert stall is not None and stall.node == "worker-1"
    assert stall.fraction >= STALLED_FRACTION and abs(stall.stretch_s - 5.0) < 1e-9
    assert "worker-1 stalled 4.2 s of the 5.0 s" in str(stall)
    assert "20.0 s judged window" in str(stall)
    # The same stall outside the judged window does not count.
    assert too_busy(busy, 1013, 1020) is None


def test_a_restarted_container_starts_a_new_count() -> None:
    points = [(0.0, 5.0), (1.0, 5.5), (2.0, 0.1), (3.0, 0.2), (8.0, 0.4)]
    found = worst_stretch(points, 0.0, 8.0)
    assert found is not None
    stalled, start, end = found
    assert stalled >= 0 and (start, end) in ((0.0, 1.0), (2.0, 8.0), (3.0, 8.0))


def test_no_samples_make_nothing_inconclusive() -> None:
    assert too_busy([], 0, 100) is None
    assert stall_steps([]) == []


def test_the_lane_is_the_worst_nodes_share_of_each_second() -> None:
    lane = stall_steps(_events({"a": [0.1, 0.9], "b": [0.5, 0.2]}))
    assert [round(v, 2) for _, v in lane] == [0.5, 0.9]


def test_a_crash_result_says_how_to_replay_and_carries_the_checkpointed_history() -> None:
    facts = {
        "name": "t",
        "fullName": "experiments.test_churn#test_x",
        "parameters": [{"name": "churn_s", "value": "100.0"}],
        CRASH_FACTS: {"seed": True},
    }
    result = crash_result(
        "experiments/test_churn.py::test_x[100s]",
        facts,
        "worker 'gw1' crashed while running …",
        "gw1",
        1,
        2,
        Replay(seed=1234, history_source="abc-attachment.json"),
    )
    assert CRASH_FACTS not in result
    assert {"name": "churn_s", "value": "100.0"} in result["parameters"]
    assert {"name": "seed", "value": "1234", "excluded": True} in result["parameters"]
    assert "--raychaos-seed 1234" in result["statusDetails"]["message"]
    assert result["attachments"] == [
        {"name": "history (last checkpoint)", "source": "abc-attachment.json",
         "type": "application/json"}
    ]  # fmt: skip
    # A test that draws no schedule from the seed gets no seed to replay.
    plain = crash_result("t.py::t", {**facts, CRASH_FACTS: {"seed": False}}, "m", "gw0", 1, 2,
                         Replay(seed=1234))  # fmt: skip
    assert "--raychaos-seed" not in plain["statusDetails"]["message"]
    assert plain["attachments"] == []


def test_a_pass_is_judged_on_its_banded_windows_and_a_failure_from_its_last_strike() -> None:
    from chaos.check.stalls import judged_windows, worst_in

    stalled = _events({"driver": [0.1] * 5 + [1.0] * 6 + [0.1] * 9})  # 1005-1011 starved
    band = Event(1016.0, "checker", Kind.MEASUREMENT, {"name": "w", "value": 3.0,
                 "band": [2.0, 18.0], "start": 1013.0})  # fmt: skip
    strike = Event(1002.0, "nemesis", Kind.INJECT, {"fault": "kill_node"})
    events = [*stalled, band, strike]
    # Passed: only the banded window (1013-1016) counts, and it was quiet.
    assert judged_windows(events, 1000.0, 1020.0, failed=False) == [(1013.0, 1016.0)]
    quiet = worst_in(events, judged_windows(events, 1000.0, 1020.0, failed=False))
    assert quiet is not None and quiet.fraction < STALLED_FRACTION
    # Failed: from the last strike to the failure, across the starved seconds.
    windows = judged_windows(events, 1000.0, 1020.0, failed=True)
    assert windows[-1] == (1002.0, 1020.0)
    worst = worst_in(events, windows)
    assert worst is not None and worst.node == "driver" and worst.fraction >= STALLED_FRACTION
    # A pass without a banded window judged no timing: nothing to void.
    assert judged_windows([*stalled, strike], 1000.0, 1020.0, failed=False) == []
    # A verdict function's window closes at the moment it measured, not when it was judged.
    later = Event(1019.0, "checker", Kind.MEASUREMENT, {"name": "w", "value": 3.0,
                  "band": [2.0, 18.0], "start": 1013.0, "end": 1016.0})  # fmt: skip
    assert judged_windows([*stalled, later], 1000.0, 1020.0, failed=False) == [(1013.0, 1016.0)]


def test_the_longest_silence_spans_a_windows_edges_and_needs_two_beats() -> None:
    beats = [0.0, 1.0, 2.0, 9.0, 10.0]
    # The 7 s between beats 2 and 9 is inside the window (3, 8) although no beat is.
    found = longest_silence("observer", beats, [(3.0, 8.0)])
    assert found is not None and (found.start, found.end, found.seconds) == (2.0, 9.0, 7.0)
    assert found.to_json()["watcher"] == "observer"
    # A window among regular beats: one period.
    steady = longest_silence("stall sampler", beats, [(0.5, 1.5)])
    assert steady is not None and steady.seconds == 1.0
    # Nothing watching around the window: no silence to report, not a zero.
    assert longest_silence("observer", [], [(0.0, 5.0)]) is None
    assert longest_silence("observer", [20.0], [(0.0, 5.0)]) is None


def test_a_boot_is_judged_over_the_raylets_15_s_wait() -> None:
    """A 4 s burst that voids a body's window does not void a boot (15 s stretch: 0.4);
    a node starved for most of 15 s does, and only the booting nodes count."""
    burst = _events({"head": [0.1] * 30, "worker-1": [0.2] * 8 + [1.0] * 4 + [0.2] * 18})
    assert too_busy(burst, 1000, 1030) is not None
    worst = boot_stall(burst, 1000, 1030, ["head", "worker-1"])
    assert worst is not None and not material(worst)
    assert abs(worst.stretch_s - BOOT_STRETCH_S) < 1e-9
    starved = _events({"head": [0.1] * 30, "worker-1": [0.2] * 5 + [0.9] * 16 + [0.2] * 9})
    stall = boot_stall(starved, 1000, 1030, ["head", "worker-1"])
    assert stall is not None and material(stall) and stall.node == "worker-1"
    assert stall.window == (1000, 1030)
    assert boot_stall(starved, 1000, 1030, ["head"]) is not None
    assert not material(boot_stall(starved, 1000, 1030, ["head"]))
    assert boot_stall([], 1000, 1030, ["head"]) is None


class _Booting:
    def __init__(self, events: list[Event]) -> None:
        self.history = History()
        for event in events:
            self.history.append(event)


def test_a_boot_timeout_on_a_stalled_host_is_too_busy_and_on_a_quiet_one_stays_broken() -> None:
    timeout = ClusterBootTimeout("cluster cluster not ready: not all nodes ALIVE after 180 s")
    worker = SimpleNamespace(name="worker-1")
    t0 = time.time() - 40
    starved = _Booting(_events({"worker-1": [0.9] * 30}, t0=t0))
    error = too_busy_to_boot(starved, [worker], t0, timeout)  # type: ignore[arg-type,list-item]
    assert isinstance(error, HostTooBusy) and isinstance(error, ClusterBootTimeout)
    assert error.stall.startswith("worker-1 stalled 13.5 s of the 15.0 s")
    assert str(error).startswith("the host was too busy to boot: worker-1 stalled")
    assert "not all nodes ALIVE after 180 s" in str(error)
    kinds = [e.kind for e in starved.history.events()]
    assert kinds[-2:] == [Kind.MEASUREMENT, Kind.INCONCLUSIVE]
    quiet = _Booting(_events({"worker-1": [0.1] * 30}, t0=t0))
    assert too_busy_to_boot(quiet, [worker], t0, timeout) is None  # type: ignore[arg-type,list-item]
    assert quiet.history.events()[-1].kind == Kind.MEASUREMENT  # measured, not excused
    unsampled = _Booting([])
    assert too_busy_to_boot(unsampled, [worker], t0, timeout) is None  # type: ignore[arg-type,list-item]
