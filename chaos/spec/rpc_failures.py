"""Ray's own RPC failure injection as a value: which client calls fail, how, and how often.

Every Ray C++ process (GCS, raylet, the core worker of each driver and worker) reads
``RAY_testing_rpc_failure`` once at start and makes its own *outgoing* calls fail on the client
side (``grpc_client.h``): a *request* failure answers UNAVAILABLE without sending the call, a
*response* failure sends it and loses the reply, an *in-flight* failure answers UNAVAILABLE
while the server still runs it. Each injected failure is logged by the failing process
(``Inject RPC request failure for <method>``), which is how a fault proves it struck.

The value's format changed in Ray 2.54.0 to a JSON object keyed by method; before, it was
``method=max:req%:resp%`` pairs whose fields changed more than once, so raychaos writes the
JSON form only and refuses older releases in one line. Ray ignores a method name it does not
know, silently, so the harness checks every name against the release's own services before
writing the value (:mod:`chaos.nemesis.rpc`); here only what needs no cluster is checked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from chaos.errors import SpecError
from chaos.spec.releases import release_key

ENV = "RAY_testing_rpc_failure"
#: The first release whose value is JSON (ray-project/ray#58886).
JSON_SINCE = "2.54.0"
#: Every method at once; Ray lets it override every other entry, so it must stand alone.
WILDCARD = "*"


class Mode(StrEnum):
    """Where an injected failure lands, as Ray's log line names it."""

    REQUEST = "request"
    RESPONSE = "response"
    IN_FLIGHT = "in-flight"


@dataclass(frozen=True)
class RpcFailure:
    """Failures of one client method: ``num_failures`` in all (-1: no limit), each call failing
    with the given percentages; the first ``first_*`` calls fail that way whatever the dice say
    (Ray's ``num_lower_bound_*_failures``)."""

    #: ``Service.grpc_client.Method`` (``ray::rpc::`` before GCS services), or ``*``.
    method: str
    num_failures: int = 1
    request_pct: int = 0
    response_pct: int = 0
    in_flight_pct: int = 0
    first_requests: int = 0
    first_responses: int = 0
    first_in_flight: int = 0

    def __post_init__(self) -> None:
        field = f"RpcFailure({self.method!r})"
        if not self.method or (self.method != WILDCARD and ".grpc_client." not in self.method):
            raise SpecError(
                f"{field}.method",
                "Service.grpc_client.Method (GCS services: ray::rpc::Service.grpc_client.Method)",
                self.method,
                hint="e.g. CoreWorkerService.grpc_client.PushTask",
            )
        if self.num_failures < -1 or self.num_failures == 0:
            raise SpecError(
                f"{field}.num_failures", "a positive count, or -1 for no limit", self.num_failures
            )
        pcts = (self.request_pct, self.response_pct, self.in_flight_pct)
        if any(not 0 <= p <= 100 for p in pcts) or sum(pcts) > 100:
            raise SpecError(f"{field} percentages", "whole percentages summing to ≤ 100", pcts)
        firsts = (self.first_requests, self.first_responses, self.first_in_flight)
        if any(f < 0 for f in firsts) or (
            self.num_failures > 0 and sum(firsts) > self.num_failures
        ):
            raise SpecError(f"{field} first_*", "counts ≥ 0 within num_failures", firsts)
        if not any(pcts) and not any(firsts):
            raise SpecError(
                f"{field}", "a failure percentage or a first_* count", "neither: it never fails"
            )

    def as_json(self) -> dict[str, int]:
        """Only the keys in use: a key a release does not know ends every Ray process that
        reads it ("Unknown key specified in testing_rpc_failure config")."""
        keys = {
            "num_failures": self.num_failures,
            "req_failure_prob": self.request_pct,
            "resp_failure_prob": self.response_pct,
            "in_flight_failure_prob": self.in_flight_pct,
            "num_lower_bound_req_failures": self.first_requests,
            "num_lower_bound_resp_failures": self.first_responses,
            "num_lower_bound_in_flight_failures": self.first_in_flight,
        }
        return {k: v for k, v in keys.items() if v or k == "num_failures"}


def rpc_failure_value(failures: Sequence[RpcFailure], ray_version: str) -> str:
    """``RAY_testing_rpc_failure``'s value for ``ray_version`` (:class:`SpecError` for a
    release before :data:`JSON_SINCE`, or for entries Ray would not read as meant)."""
    if not failures:
        raise SpecError("RPC failures", "at least one RpcFailure", [])
    methods = [f.method for f in failures]
    if dupes := sorted({m for m in methods if methods.count(m) > 1}):
        raise SpecError("RPC failures", "each method once", dupes)
    if WILDCARD in methods and len(methods) > 1:
        raise SpecError(
            "RPC failures",
            "'*' alone (Ray lets it override every other method)",
            methods,
            hint="give the methods one by one, or only '*'",
        )
    if release_key(ray_version) < release_key(JSON_SINCE):
        raise SpecError(
            "RPC failures",
            f"Ray {JSON_SINCE} or later (its JSON format of RAY_testing_rpc_failure)",
            ray_version,
            hint="older releases read method=count:percentages pairs whose fields changed "
            "between releases; raychaos does not write them",
        )
    return json.dumps({f.method: f.as_json() for f in failures}, separators=(",", ":"))
