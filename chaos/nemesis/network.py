"""Network faults: partitions (iptables DROP) and degraded links (tc netem).

Every iptables fault owns one chain (``RAYCHAOS-<n>``), jumped to from INPUT/OUTPUT, and heal
removes exactly that chain: a partition's heal never lifts a concurrent degrade (Pumba's rule,
one step further). Both effect and heal are proven with real traffic: a TCP connect from one
side to a port the other side listens on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, CheckFailed
from chaos.nemesis.base import Fault, host_up, run, sh
from chaos.waits import poll

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster

#: Prefix of our iptables chains; nothing else in a node is ours to remove.
CHAIN_PREFIX = "RAYCHAOS"
_chain_numbers = itertools.count(1)


def new_chain() -> str:
    return f"{CHAIN_PREFIX}-{next(_chain_numbers)}"


def install_chain(
    cluster: Cluster, node: str, chain: str, hooks: Sequence[str], rules: Sequence[str]
) -> None:
    """Create ``chain`` with ``rules``, jumped to first from each of ``hooks`` (INPUT, OUTPUT):
    before any ESTABLISHED accept, so open connections are cut too."""
    script = [f"iptables -N {chain}"]
    script += [f"iptables -A {chain} {rule}" for rule in rules]
    script += [f"iptables -I {hook} -j {chain}" for hook in hooks]
    sh(cluster, node, " && ".join(script))


def remove_chain(cluster: Cluster, node: str, chain: str) -> None:
    """Remove ``chain`` and every jump to it, and prove it is gone (idempotent). A host that is
    not up took its network namespace, and the chain, with it."""
    if not host_up(cluster, node):
        return
    unhook = " ".join(
        f"while iptables -D {hook} -j {chain} 2>/dev/null; do :; done;"
        for hook in ("INPUT", "OUTPUT")
    )
    # Each step may have nothing to remove (a partial inject, a second attempt): the proof
    # below, not these exit codes, says whether the chain is gone.
    drop = f"iptables -F {chain} 2>/dev/null; iptables -X {chain} 2>/dev/null; true"
    sh(cluster, node, f"{unhook} {drop}")
    rules = run(cluster, node, ["iptables", "-S"]).splitlines()
    left = [line for line in rules if chain in line.split()]  # RAYCHAOS-1 is not RAYCHAOS-10
    if left:
        raise CheckFailed(f"{chain} still in {node}: {left}")


def connects(cluster: Cluster, src: str, dst: str) -> bool | None:
    """Whether ``src`` opens a TCP connection to a port ``dst`` listens on (not loopback);
    None when ``dst`` listens on none (not running Ray): nothing to test."""
    listening = run(cluster, dst, ["ss", "-ltnH"], timeout=15)
    ports = [
        fields[3].rsplit(":", 1)[1]
        for fields in (line.split() for line in listening.splitlines())
        if len(fields) > 3 and not fields[3].startswith(("127.", "[::1]"))
    ]
    if not ports:
        return None
    probe = (
        "import socket\n"
        "s=socket.socket(); s.settimeout(2)\n"
        "try:\n"
        f"    s.connect(({cluster.node(dst).ip!r}, {int(ports[0])})); print('open')\n"
        "except OSError:\n"
        "    print('closed')\n"
    )
    answer = run(cluster, src, ["python3", "-c", probe], timeout=15).strip()
    if answer not in {"open", "closed"}:
        raise ChaosError(f"connect probe {src} → {dst} said {answer!r}")
    return answer == "open"


@dataclass(eq=False)
class Partition(Fault):
    """Cut traffic between every pair of ``groups`` (node names), both ways, established
    connections too. Nodes in no group keep talking to everyone."""

    groups: Sequence[Iterable[str]]
    chain: str = field(default="", init=False)
    kind = "partition"

    def __post_init__(self) -> None:
        self.groups = tuple(tuple(group) for group in self.groups)
        if len(self.groups) < 2 or not all(self.groups):
            raise ChaosError(f"partition needs at least two non-empty groups, got {self.groups}")

    @property
    def target(self) -> str:
        return " | ".join(",".join(group) for group in self.groups)

    @property
    def details(self) -> dict[str, Any]:
        return {"chain": self.chain}

    def _peers(self, cluster: Cluster) -> dict[str, list[str]]:
        """Per node, the addresses of every node in another group."""
        peers = {}
        for index, group in enumerate(self.groups):
            others = [
                cluster.node(n).ip for j, g in enumerate(self.groups) if j != index for n in g
            ]
            for name in group:
                peers[name] = others
        return peers

    def prepare(self, cluster: Cluster) -> None:
        self._peers(cluster)  # unknown names fail here, before any effect
        self.chain = new_chain()

    def inject(self, cluster: Cluster) -> None:
        for name, ips in self._peers(cluster).items():
            rules = [r for ip in ips for r in (f"-s {ip} -j DROP", f"-d {ip} -j DROP")]
            install_chain(cluster, name, self.chain, ("INPUT", "OUTPUT"), rules)

    def verify(self, cluster: Cluster) -> None:
        tested = self._probe(cluster, blocked=True)
        if not tested:
            raise CheckFailed("no node on either side listens on a port: the cut cannot be seen")

    def undo(self, cluster: Cluster) -> None:
        errors = []
        for name in self._peers(cluster):
            try:
                remove_chain(cluster, name, self.chain)
            except ChaosError as exc:  # the other nodes are still healed
                errors.append(str(exc))
        if errors:
            raise ChaosError("; ".join(errors))

        def flowing() -> None:
            self._probe(cluster, blocked=False)

        poll(flowing, self.verify_timeout_s)

    def _probe(self, cluster: Cluster, *, blocked: bool) -> int:
        """Connect both ways between the first running node of every two groups; assert
        each is ``blocked`` (or not); return how many directions could be tested."""
        running = (
            next((n for n in g if cluster.backend.state(n) == "running"), None) for g in self.groups
        )
        up = [n for n in running if n is not None]
        tested = 0
        for index, a in enumerate(up):
            for b in up[index + 1 :]:
                for src, dst in ((a, b), (b, a)):
                    reachable = connects(cluster, src, dst)
                    if reachable is None:
                        continue
                    tested += 1
                    if reachable is blocked:
                        raise CheckFailed(
                            f"{src} → {dst}: traffic "
                            f"{'still flows' if blocked else 'still blocked after heal'}"
                        )
        return tested


@dataclass(eq=False)
class Degrade(Fault):
    """Delay, jitter and loss on everything ``node`` sends (tc netem on eth0).

    Kernels without netem (``CONFIG_NET_SCH_NETEM``) still get loss, through an iptables
    ``statistic`` rule in the fault's own chain; delay there is refused with a clear error.
    """

    node: str
    delay_ms: int = 0
    jitter_ms: int = 0
    loss_pct: float = 0.0
    netem: bool = field(default=False, init=False)
    chain: str = field(default="", init=False)
    kind = "degrade"

    def __post_init__(self) -> None:
        if self.delay_ms <= 0 and self.loss_pct <= 0:
            raise ChaosError("degrade needs delay_ms > 0 or loss_pct > 0")

    @property
    def target(self) -> str:
        return self.node

    @property
    def rule(self) -> str:
        if not self.netem:
            chance = f"{self.loss_pct / 100:.4f}"
            return f"-o eth0 -m statistic --mode random --probability {chance} -j DROP"
        words = ["netem"]
        if self.delay_ms:
            words += ["delay", f"{self.delay_ms}ms"]
            words += [f"{self.jitter_ms}ms"] if self.jitter_ms else []
        if self.loss_pct:
            words += ["loss", f"{self.loss_pct}%"]
        return " ".join(words)

    @property
    def details(self) -> dict[str, Any]:
        return {"rule": self.rule if self.netem else f"iptables {self.chain} {self.rule}"}

    def prepare(self, cluster: Cluster) -> None:
        # Probed on loopback, never on eth0: a probe there would replace a running degrade.
        probe = cluster.exec(
            self.node,
            ["sh", "-c", "tc qdisc add dev lo root netem delay 1ms && tc qdisc del dev lo root"],
            timeout=30,
        )
        self.netem = probe.ok
        if probe.exit_code == 127:
            raise ChaosError(f"degrade: no `tc` in {self.node}: {probe.output.strip()}")
        if not self.netem and self.delay_ms:
            raise ChaosError(
                f"degrade(delay_ms={self.delay_ms}) needs tc netem, which this kernel lacks "
                f"({probe.output.strip()})",
                hint="use loss_pct only (iptables), or a Docker host whose kernel has "
                "CONFIG_NET_SCH_NETEM",
            )
        if self.netem:
            shown = run(cluster, self.node, ["tc", "qdisc", "show", "dev", "eth0"])
            if "netem" in shown:
                raise ChaosError(
                    f"degrade: {self.node} is already degraded ({shown.strip()})",
                    hint="heal that degrade first, or give delay and loss in one degrade",
                )
        else:
            self.chain = new_chain()

    def inject(self, cluster: Cluster) -> None:
        if self.netem:
            sh(cluster, self.node, f"tc qdisc replace dev eth0 root {self.rule}")
        else:
            install_chain(cluster, self.node, self.chain, ("OUTPUT",), [self.rule])

    def verify(self, cluster: Cluster) -> None:
        if self.netem:
            shown = run(cluster, self.node, ["tc", "qdisc", "show", "dev", "eth0"])
            if "netem" not in shown:
                raise CheckFailed(f"no netem qdisc on {self.node}: {shown!r}")
        else:
            shown = run(cluster, self.node, ["iptables", "-S", self.chain])
            if "statistic" not in shown:
                raise CheckFailed(f"no loss rule on {self.node}: {shown!r}")

    def undo(self, cluster: Cluster) -> None:
        if not self.netem:
            remove_chain(cluster, self.node, self.chain)
            return
        if not host_up(cluster, self.node):
            return
        if "netem" in run(cluster, self.node, ["tc", "qdisc", "show", "dev", "eth0"]):
            run(cluster, self.node, ["tc", "qdisc", "del", "dev", "eth0", "root"])
        shown = run(cluster, self.node, ["tc", "qdisc", "show", "dev", "eth0"])
        if "netem" in shown:
            raise CheckFailed(f"netem still on {self.node}: {shown.strip()}")
