"""``raychaos bench processes``: what each Ray process costs to start in our containers.

One cluster (head + 2 workers + the driver node, as the experiments boot it) is created from
the harness's own plan — same image, argv, env and container limits — except that each
node's ``ray start`` is preceded by a small sampler started by the same shell. Every 0.2 s
for ``duration`` seconds the sampler notes new processes and the TCP ports listening in the
node; at the end it reads, per process, its start time, CPU seconds (user + system), resident
memory and listening sockets. A process is *ready* when its first listening port appeared
(processes that listen on nothing — the log monitor, the autoscaler monitor — have no such
moment; their start and CPU are still measured). Times are seconds after ``ray start`` was
launched in the node. The sampler's own cost is left out; it reads /proc only.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker import docker_backend
from chaos.cluster import boot
from chaos.cluster.boot_slots import boot_slot, default_slots
from chaos.errors import ChaosError, CheckFailed
from chaos.resources import default_cache_dir
from chaos.spec.plan import NodePlan
from chaos.spec.topology import ClusterSpec, NodeSpec
from chaos.waits import wait_until

if TYPE_CHECKING:
    from chaos.backends.docker import DockerClient
    from chaos.backends.docker.images import ImageBuilder

OUTPUT = "/tmp/raychaos-processes.json"

#: Runs in the node (the image's Python), in the background of the shell that then execs
#: ``ray start``; DURATION and OUTPUT are filled in.
SAMPLER = r"""
import json, os, time
DURATION, OUTPUT = {duration!r}, {output!r}
me = os.getpid()
clk = os.sysconf("SC_CLK_TCK")
btime = next(int(l.split()[1]) for l in open("/proc/stat") if l.startswith("btime"))
page = os.sysconf("SC_PAGE_SIZE")
listen_first, procs = {{}}, {{}}

def listening():
    found = {{}}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A":
                found[f[9]] = int(f[1].rsplit(":", 1)[1], 16)
    return found

def stat(pid):
    raw = open("/proc/%s/stat" % pid).read()
    rest = raw[raw.rindex(")") + 2:].split()
    return {{"start": btime + int(rest[19]) / clk, "cpu_s": (int(rest[11]) + int(rest[12])) / clk,
             "rss": int(rest[21]) * page}}

def sample(now):
    for inode, port in listening().items():
        listen_first.setdefault(inode, [port, now])
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            s = stat(pid)
            s["last"] = now
            if pid not in procs:
                argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
                s["argv"] = [a.decode(errors="replace") for a in argv if a]
                s["ppid"] = int(open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[1])
                procs[pid] = s
            else:
                procs[pid].update(s)
        except (OSError, ValueError, IndexError):
            pass

end = time.time() + DURATION
while time.time() < end:
    sample(time.time())
    time.sleep(0.2)
sample(time.time())
for pid, p in procs.items():
    p["sockets"] = []
    try:
        for fd in os.listdir("/proc/%s/fd" % pid):
            link = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            inode = link[8:-1] if link.startswith("socket:[") else ""
            if inode in listen_first:
                p["sockets"].append(listen_first[inode])
        p["alive"] = True
    except OSError:
        p["alive"] = False
tmp = OUTPUT + ".tmp"
with open(tmp, "w") as out:
    json.dump({{"pid": me, "procs": procs}}, out)
os.replace(tmp, OUTPUT)
"""

#: (pattern on the command line, what the process is), first match wins.
KINDS: tuple[tuple[str, str], ...] = (
    (r"^\S*/gcs_server(?:\s|$)", "gcs_server"),
    (r"^\S*/raylet(?:\s|$)", "raylet"),
    (r"dashboard/dashboard\.py", "dashboard"),
    (r"^ray-dashboard-(\w+?)(?:-\d+)?\b", "dashboard module {0}"),
    (r"dashboard/agent\.py", "dashboard agent"),
    (r"runtime_env/agent/main\.py", "runtime-env agent"),
    (r"log_monitor\.py", "log monitor"),
    (r"monitor\.py", "autoscaler monitor"),
    (r"ray\.util\.client\.server", "client server"),
    (r"default_worker\.py|^ray::", "worker process"),
    (r"\bray start\b|/ray start|bin/ray\b", "ray start"),
)


#: Programs around ``ray start`` whose command lines name it: the node entry, its shell.
NOT_RAY = frozenset({"sh", "bash", "docker-init", "sleep", "raychaos-node-entry"})


def kind_of(argv: Sequence[str]) -> str | None:
    """What a Ray process is, from its command line; None for what is not Ray's."""
    if not argv or argv[0].rsplit("/", 1)[-1] in NOT_RAY:
        return None
    line = " ".join(argv)
    for pattern, name in KINDS:
        found = re.search(pattern, line)
        if found:
            return name.format(*found.groups())
    return None


def sampled(argv: Sequence[str], duration: float) -> tuple[str, ...]:
    """``argv`` run by a shell that first starts the sampler in the background."""
    code = SAMPLER.format(duration=float(duration), output=OUTPUT)
    return ("sh", "-c", 'python3 -c "$0" & exec "$@"', code, *argv)


@dataclass(frozen=True)
class ProcessCost:
    node: str
    role: str
    kind: str
    #: Seconds after the node's ``ray start`` began.
    started_s: float
    #: When its first listening port appeared (None: it listens on nothing); for ``ray start``
    #: when it returned.
    ready_s: float | None
    ports: tuple[int, ...]
    cpu_s: float
    rss_mib: float
    alive: bool


def costs_of(node: str, role: str, sample: dict[str, Any]) -> list[ProcessCost]:
    """One node's sampler output → the Ray processes it saw, ``ray start`` as time zero."""
    procs: dict[str, dict[str, Any]] = sample.get("procs", {})
    starts = [p for p in procs.values() if kind_of(p.get("argv", [])) == "ray start"]
    if not starts:
        raise ChaosError(f"the sampler on {node} never saw `ray start`")
    zero = min(float(p["start"]) for p in starts)
    found = []
    for p in procs.values():
        kind = kind_of(p.get("argv", []))
        if kind is None:
            continue
        sockets = p.get("sockets", [])
        ready = min(float(t) for _, t in sockets) if sockets else None
        if kind == "ray start" and not p.get("alive"):
            ready = float(p.get("last", p["start"]))  # returned within one sample of this
        found.append(
            ProcessCost(
                node=node,
                role=role,
                kind=kind,
                started_s=round(float(p["start"]) - zero, 2),
                ready_s=round(ready - zero, 2) if ready is not None else None,
                ports=tuple(sorted(int(port) for port, _ in sockets)),
                cpu_s=round(float(p["cpu_s"]), 2),
                rss_mib=round(float(p["rss"]) / 2**20, 1),
                alive=bool(p.get("alive")),
            )
        )
    return sorted(found, key=lambda c: (c.started_s, c.kind))


def process_spec(ray_version: str) -> ClusterSpec:
    """What most experiments boot: head, two workers, the zero-CPU driver node."""
    return ClusterSpec(
        name="procs",
        ray_version=ray_version,
        head=NodeSpec(name="head", num_cpus=1),
        workers=(NodeSpec(name="worker", count=2, num_cpus=1),),
    )


def sample_cluster(
    client: DockerClient,
    builder: ImageBuilder,
    spec: ClusterSpec,
    duration: float = 40.0,
    index: int = 0,
) -> list[ProcessCost]:
    """Boot ``spec`` with a sampler in every Ray node; the processes of every node."""
    identity = labels.RunIdentity(worker="bench")
    backend = docker_backend(
        spec.name, client=client, builder=builder, identity=identity, tag=f"p{index}"
    )
    try:
        plan = boot.prepare(spec, backend)
        nodes: list[NodePlan] = [
            dataclasses.replace(n, argv=sampled(n.argv, duration))
            for n in plan.nodes
            if n.role != "redis"
        ]
        with boot_slot(default_cache_dir() / "boot-slots", default_slots()):
            with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
                list(pool.map(backend.start_node, nodes))

            def written() -> None:
                for node in nodes:
                    probe = backend.exec(node.name, ["test", "-s", OUTPUT], timeout=10, env={})
                    if not probe.ok:
                        raise CheckFailed(f"{node.name}: no sampler output yet")

            wait_until(written, duration + 60, "every node's sampler wrote its output")
        found: list[ProcessCost] = []
        for node in nodes:
            result = backend.exec(node.name, ["cat", OUTPUT], timeout=30, env={})
            if not result.ok:
                raise ChaosError(f"could not read the sampler output of {node.name}")
            found += costs_of(node.name, node.role, json.loads(result.output))
        return found
    finally:
        backend.teardown()


@dataclass(frozen=True)
class Row:
    role: str
    kind: str
    count: int
    started_s: float
    ready_s: float | None
    cpu_s: float
    rss_mib: float


def summarise(runs: Sequence[Sequence[ProcessCost]]) -> list[Row]:
    """Per role and kind: medians over runs of the per-node figures (processes of one kind
    on one node are summed: a node's worker processes, the dashboard's modules)."""
    per: dict[tuple[str, str], list[tuple[int, float, float | None, float, float]]] = {}
    for run in runs:
        grouped: dict[tuple[str, str, str], list[ProcessCost]] = {}
        for cost in run:
            grouped.setdefault((cost.role, cost.kind, cost.node), []).append(cost)
        for (role, kind, _), costs in grouped.items():
            ready = [c.ready_s for c in costs if c.ready_s is not None]
            per.setdefault((role, kind), []).append(
                (
                    len(costs),
                    min(c.started_s for c in costs),
                    min(ready) if ready else None,
                    sum(c.cpu_s for c in costs),
                    sum(c.rss_mib for c in costs),
                )
            )
    rows = []
    for (role, kind), values in per.items():
        ready = [v[2] for v in values if v[2] is not None]
        rows.append(
            Row(
                role,
                kind,
                round(statistics.median(v[0] for v in values)),
                statistics.median(v[1] for v in values),
                statistics.median(ready) if ready else None,
                statistics.median(v[3] for v in values),
                statistics.median(v[4] for v in values),
            )
        )
    order = ("head", "worker", "driver")
    return sorted(rows, key=lambda r: (order.index(r.role), r.started_s, r.kind))


def table(rows: Iterable[Row], runs: int) -> str:
    lines = [
        f"Ray processes per node ({runs} boot(s), medians; worker and driver rows are per node; "
        "ready = first port listening, for ray start = returned)",
        "",
        "| node | process | count | started (s) | ready (s) | CPU (s) | RSS (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ready = f"{r.ready_s:.2f}" if r.ready_s is not None else "—"
        lines.append(
            f"| {r.role} | {r.kind} | {r.count} | {r.started_s:.2f} | {ready} "
            f"| {r.cpu_s:.2f} | {r.rss_mib:.0f} |"
        )
    return "\n".join(lines)


def bench_processes(
    client: DockerClient,
    builder: ImageBuilder,
    ray_version: str,
    runs: int = 1,
    duration: float = 40.0,
    progress: Callable[[str], None] = print,
) -> tuple[list[Row], list[list[ProcessCost]]]:
    spec = process_spec(ray_version)
    samples = []
    for index in range(1, runs + 1):
        started = time.monotonic()
        samples.append(sample_cluster(client, builder, spec, duration, index))
        progress(f"run {index}/{runs}: sampled in {time.monotonic() - started:.0f} s")
    return summarise(samples), samples
