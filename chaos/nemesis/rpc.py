"""RPC failures as a fault: a workload driver whose own client calls fail, by Ray's injection.

Ray injects RPC failures on the caller's side, in the process that read
``RAY_testing_rpc_failure`` at start (:mod:`chaos.spec.rpc_failures`). A driver's core worker
makes the calls a caller is promised something about: ``CoreWorkerService.grpc_client.PushTask``
(a task or actor call sent to the worker that runs it), ``NodeManagerService.grpc_client.
RequestWorkerLease`` (a lease asked of a raylet) and every GCS call it makes. So the fault
*is* the driver: :class:`RpcFailures` starts the workload with the value set, nothing else
in the cluster reads it, and the cluster's own processes keep working.

Before striking, every method is checked against the node's release (one exec of
``raychaos_agent.rpc_methods``): Ray would ignore an unknown name and the experiment would
judge calls that never failed. The proof is Ray's own log line for each failure it injected,
in the driver's core-worker log (``Inject RPC response failure for <method>``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, FaultNotObserved, SpecError
from chaos.nemesis.base import Fault, run, sh
from chaos.spec.rpc_failures import ENV, WILDCARD, Mode, RpcFailure, rpc_failure_value

if TYPE_CHECKING:
    from chaos.cluster.cluster import Cluster
    from chaos.workload.run import WorkloadRun

#: Ray's line for each failure it injects (``grpc_client.h``, ``retryable_grpc_client.cc``).
INJECTED = re.compile(r"Inject RPC (request|response|in-flight) failure for (\S+)")
LOGS = "/tmp/ray/session_latest/logs"


def known_methods(cluster: Cluster, node: str) -> frozenset[str]:
    """The client methods the Ray of ``node`` can fail, as its C++ clients name them."""
    output = run(cluster, node, ["python", "-m", "raychaos_agent.rpc_methods"], timeout=60)
    try:
        return frozenset(json.loads(output.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError) as exc:
        raise ChaosError(f"{node}: no method list from raychaos_agent.rpc_methods: {output}") from (
            exc
        )


def check_methods(failures: Sequence[RpcFailure], known: frozenset[str], release: str) -> None:
    """:class:`SpecError` naming the first method Ray ``release`` does not know."""
    for failure in failures:
        if failure.method != WILDCARD and failure.method not in known:
            close = difflib.get_close_matches(failure.method, sorted(known), n=3, cutoff=0.6)
            raise SpecError(
                "RpcFailure.method",
                f"a client method of Ray {release} (Ray ignores any other name)",
                failure.method,
                hint=f"did you mean {', '.join(close)}?"
                if close
                else "list them with: python -m raychaos_agent.rpc_methods (in a node)",
            )


@dataclass(eq=False)
class RpcFailures(Fault):
    """Start ``workload(**kwargs)`` on ``node`` as a driver whose calls fail as
    ``failures`` say; proven by Ray's log line for at least one injected failure."""

    node: str
    failures: tuple[RpcFailure, ...]
    #: The workload the driver runs (``module:function``).
    workload: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 300.0
    kind = "rpc_failures"
    permanent = True
    #: The proof waits for the driver to connect (ray.init: seconds, tens on a loaded host)
    #: and make its first call of the method.
    verify_timeout_s = 60.0
    #: The driver, once started (:meth:`inject`).
    run: WorkloadRun | None = None
    value: str = ""

    @property
    def target(self) -> str:
        return f"{self.node}:driver"

    @property
    def details(self) -> dict[str, Any]:
        return {"node": self.node, "workload": self.workload, "value": self.value}

    def prepare(self, cluster: Cluster) -> None:
        release = cluster.node(self.node).ray_version or cluster.spec.ray_version
        check_methods(self.failures, known_methods(cluster, self.node), release)
        self.value = rpc_failure_value(self.failures, release)

    def inject(self, cluster: Cluster) -> None:
        env = {ENV: self.value}
        self.run = cluster.run(
            self.workload, node=self.node, timeout=self.timeout, env=env, **self.kwargs
        )

    def verify(self, cluster: Cluster) -> None:
        if self.run is None:
            raise FaultNotObserved("the driver never started")
        if not self.injected(cluster):
            if not self.run.stream.running:
                raise FaultNotObserved(
                    f"the driver ended without an injected RPC failure: {self.run.stream.tail(5)}"
                )
            raise AssertionError("no injected RPC failure logged yet")

    def injected(self, cluster: Cluster) -> Counter[tuple[Mode, str]]:
        """Failures Ray logged injecting in this driver so far, by (mode, method)."""
        pid = self.run.stream.pid if self.run is not None else None
        if pid is None:
            return Counter()
        output = sh(
            cluster,
            self.node,
            f"cat {LOGS}/python-core-driver-*_{int(pid)}.log 2>/dev/null || true",
            timeout=15,
        )
        return Counter((Mode(m), method) for m, method in INJECTED.findall(output))
