"""RPC failure values: what Ray reads, and what the harness refuses before any cluster."""

from __future__ import annotations

import json

import pytest

from chaos.errors import SpecError
from chaos.nemesis.rpc import INJECTED, check_methods
from chaos.spec.rpc_failures import RpcFailure, rpc_failure_value

PUSH = "CoreWorkerService.grpc_client.PushTask"
LEASE = "NodeManagerService.grpc_client.RequestWorkerLease"
KNOWN = frozenset({PUSH, LEASE, "ray::rpc::ActorInfoGcsService.grpc_client.CreateActor"})


def test_the_json_value_holds_only_the_keys_in_use() -> None:
    value = rpc_failure_value(
        [RpcFailure(PUSH, 2, response_pct=100), RpcFailure(LEASE, -1, request_pct=10)], "2.60.0"
    )
    assert json.loads(value) == {
        PUSH: {"num_failures": 2, "resp_failure_prob": 100},
        LEASE: {"num_failures": -1, "req_failure_prob": 10},
    }


def test_first_counts_and_in_flight_are_written_as_ray_names_them() -> None:
    value = rpc_failure_value([RpcFailure(PUSH, 3, in_flight_pct=50, first_requests=1)], "2.54.0")
    assert json.loads(value)[PUSH] == {
        "num_failures": 3,
        "in_flight_failure_prob": 50,
        "num_lower_bound_req_failures": 1,
    }


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"method": "PushTask"}, "Service.grpc_client.Method"),
        ({"method": PUSH, "num_failures": 0}, "num_failures"),
        ({"method": PUSH, "num_failures": -2, "request_pct": 1}, "num_failures"),
        ({"method": PUSH, "request_pct": 60, "response_pct": 50}, "summing to ≤ 100"),
        ({"method": PUSH, "request_pct": 101}, "summing to ≤ 100"),
        ({"method": PUSH, "num_failures": 1, "first_requests": 2}, "within num_failures"),
        ({"method": PUSH}, "it never fails"),
    ],
)
def test_a_failure_ray_would_not_read_as_meant_is_refused(
    kwargs: dict[str, object], says: str
) -> None:
    with pytest.raises(SpecError, match=says):
        RpcFailure(**kwargs)  # type: ignore[arg-type]


def test_values_ray_would_misread_are_refused() -> None:
    push = RpcFailure(PUSH, 1, request_pct=100)
    with pytest.raises(SpecError, match="each method once"):
        rpc_failure_value([push, push], "2.60.0")
    with pytest.raises(SpecError, match=r"'\*' alone"):
        rpc_failure_value([push, RpcFailure("*", -1, request_pct=1)], "2.60.0")
    with pytest.raises(SpecError, match="at least one"):
        rpc_failure_value([], "2.60.0")


def test_a_release_before_the_json_format_is_refused_in_one_line() -> None:
    with pytest.raises(SpecError) as raised:
        rpc_failure_value([RpcFailure(PUSH, 1, request_pct=100)], "2.53.0")
    assert "2.54.0 or later" in str(raised.value) and "\n" not in str(raised.value)


def test_an_unknown_method_is_refused_with_the_closest_names() -> None:
    with pytest.raises(SpecError, match=r"did you mean CoreWorkerService\.grpc_client\.PushTask"):
        check_methods(
            [RpcFailure("CoreWorkerService.grpc_client.PushTasks", 1, request_pct=1)],
            KNOWN,
            "2.60.0",
        )
    with pytest.raises(SpecError, match=r"ray::rpc::ActorInfoGcsService"):
        check_methods(
            [RpcFailure("ActorInfoGcsService.grpc_client.CreateActor", 1, request_pct=1)],
            KNOWN,
            "2.60.0",
        )
    check_methods(
        [RpcFailure(PUSH, 1, request_pct=1), RpcFailure("*", 1, request_pct=1)], KNOWN, "2.60.0"
    )


def test_rays_log_lines_are_read_as_injected_failures() -> None:
    log = (
        "[2026-12-04 19:08:17,377 I 224 240] grpc_client.h:137: Inject RPC response failure "
        f"for {PUSH}\n"
        "[2026-12-04 19:08:18,604 I 224 240] retryable_grpc_client.cc:90: Inject RPC request "
        f"failure for {LEASE}\n"
    )
    assert INJECTED.findall(log) == [("response", PUSH), ("request", LEASE)]
