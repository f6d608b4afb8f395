"""`raychaos bench processes`: the sampler script and how its output is read (no Docker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.bench.processes import (
    SAMPLER,
    costs_of,
    kind_of,
    sampled,
    summarise,
    table,
)

PY = "/opt/ray/bin/python"
SITE = "/opt/ray/lib/python3.11/site-packages/ray"


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ([f"{SITE}/core/src/ray/gcs/gcs_server", "--gcs_server_port=6379"], "gcs_server"),
        ([f"{SITE}/core/src/ray/raylet/raylet", "--raylet_socket_name=x"], "raylet"),
        ([PY, "-u", f"{SITE}/dashboard/dashboard.py", "--host=0.0.0.0"], "dashboard"),
        (["ray-dashboard-StateHead-0 (/opt/ray/bin/python -c ...)"], "dashboard module StateHead"),
        ([PY, "-u", f"{SITE}/dashboard/agent.py", "--node-ip-address=x"], "dashboard agent"),
        # Its arguments name the raylet's socket: still the agent.
        (
            [PY, f"{SITE}/dashboard/agent.py", "--raylet-name=/tmp/ray/s/sockets/raylet"],
            "dashboard agent",
        ),
        ([PY, "-u", f"{SITE}/_private/runtime_env/agent/main.py"], "runtime-env agent"),
        ([PY, "-u", f"{SITE}/_private/log_monitor.py", "--session-dir=x"], "log monitor"),
        ([PY, "-u", f"{SITE}/autoscaler/_private/monitor.py"], "autoscaler monitor"),
        ([PY, "-m", "ray.util.client.server", "--port=10001"], "client server"),
        ([PY, f"{SITE}/_private/workers/default_worker.py"], "worker process"),
        (["ray::IDLE"], "worker process"),
        ([PY, "/opt/ray/bin/ray", "start", "--head"], "ray start"),
        # The node entry and its shell name `ray start` in their arguments: not Ray's.
        (["/bin/sh", "/usr/local/bin/raychaos-node-entry", "sh", "-c", "x", "ray", "start"], None),
        (["/sbin/docker-init", "--", "ray start"], None),
        (["sleep", "infinity"], None),
        ([], None),
    ],
)
def test_kind_of_a_command_line(argv: list[str], kind: str | None) -> None:
    assert kind_of(argv) == kind


def test_the_sampler_runs_and_reports_this_machine_s_processes(tmp_path: Path) -> None:
    """The script itself, for half a second on the host: /proc is read the same way."""
    output = tmp_path / "out.json"
    code = SAMPLER.format(duration=0.5, output=str(output))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    data = json.loads(output.read_text())
    procs = data["procs"]
    assert str(data["pid"]) not in procs, "the sampler leaves itself out"
    mine = procs[str(__import__("os").getpid())]
    assert mine["argv"][0].endswith(("python", "python3")) or "python" in mine["argv"][0]
    assert mine["cpu_s"] > 0 and mine["rss"] > 0 and mine["alive"] is True


def test_sampled_argv_starts_the_sampler_then_execs_ray_start() -> None:
    argv = sampled(["ray", "start", "--head"], 30)
    assert argv[:3] == ("sh", "-c", 'python3 -c "$0" & exec "$@"')
    assert "DURATION, OUTPUT = 30.0, '/tmp/raychaos-processes.json'" in argv[3]
    assert argv[4:] == ("ray", "start", "--head")


def _sample() -> dict[str, object]:
    def proc(
        argv: list[str], start: float, cpu: float, rss_mib: float, sockets: object
    ) -> dict[str, object]:
        return {"argv": argv, "start": start, "cpu_s": cpu, "rss": rss_mib * 2**20,
                "sockets": sockets, "alive": True}  # fmt: skip

    return {
        "pid": 99,
        "procs": {
            "10": {
                **proc([PY, "/opt/ray/bin/ray", "start", "--head"], 1000.0, 2.5, 80, []),
                "alive": False,
                "last": 1008.5,
            },
            "11": proc([f"{SITE}/gcs_server"], 1001.0, 0.8, 40, [[6379, 1001.4]]),
            "12": proc([f"{SITE}/raylet/raylet"], 1002.0, 1.0, 50, [[40001, 1003.0]]),
            "13": proc(["ray-dashboard-StateHead-0"], 1004.0, 1.5, 70, []),
            "14": proc(["ray-dashboard-JobHead-0"], 1004.2, 1.7, 72, []),
            "15": proc([PY, f"{SITE}/_private/log_monitor.py"], 1002.5, 0.6, 45, []),
            "16": proc(["sleep", "infinity"], 999.0, 0.0, 1, []),
        },
    }


def test_costs_are_timed_from_ray_start() -> None:
    costs = {c.kind: c for c in costs_of("head", "head", _sample())}
    assert "sleep" not in str(costs)
    start = costs["ray start"]
    assert (start.started_s, start.ready_s, start.cpu_s) == (0.0, 8.5, 2.5), "ready: returned"
    gcs = costs["gcs_server"]
    assert (gcs.started_s, gcs.ready_s, gcs.ports, gcs.rss_mib) == (1.0, 1.4, (6379,), 40.0)
    assert costs["log monitor"].ready_s is None, "listens on nothing"


def test_summary_sums_one_node_s_processes_of_a_kind_and_takes_medians_over_runs() -> None:
    one = costs_of("head", "head", _sample())
    rows = {r.kind: r for r in summarise([one, one, one])}
    assert rows["dashboard module StateHead"].count == 1
    assert rows["raylet"].ready_s == 3.0
    text = table(rows.values(), 3)
    assert "| head | gcs_server | 1 | 1.00 | 1.40 | 0.80 | 40 |" in text


def test_a_node_without_ray_start_is_an_error() -> None:
    from chaos.errors import ChaosError

    with pytest.raises(ChaosError, match="never saw `ray start`"):
        costs_of("head", "head", {"procs": {}})
