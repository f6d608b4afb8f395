"""Ray knobs the experiments shorten, so the suite stays fast. Each experiment says which it uses.

This module is the one source of these values: experiments pass them to
``@pytest.mark.cluster(env=...)``, and a named topology (``fixtures/clusters/*.json``) lists
them by name under ``"knob_presets"`` (see :data:`PRESETS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Health checks every second, so a killed node is DEAD in ~2-4 s instead of ~14 s (a check of a
#: dead raylet fails at once). Each check may take 3 s: with 1 s, a raylet starved by a
#: neighbouring cluster's head restart on 2 cores missed three in a row and was declared dead
#: (ACTOR-05, a clean-clone suite run at load 33). A partitioned node (checks time out) is DEAD
#: within 3 × (1 + 3) s.
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "3000",
    "RAY_health_check_failure_threshold": "3",
}

#: Raylets and drivers give up on an unreachable GCS after this long (default 60 s).
GCS_RECONNECT_S = 20
GCS_RECONNECT = {"RAY_gcs_rpc_server_reconnect_timeout_s": str(GCS_RECONNECT_S)}

#: gRPC client keepalive shortened, like Ray's own partition test
#: (``python/ray/tests/test_network_failure_e2e.py``), though less: that test sets both client
#: knobs and the server's ``grpc_keepalive_time_ms`` to 1000 ms; the NET evidence
#: (docs/evidence/network.md) was measured with 5 s. Under a partition that drops packets no
#: RST arrives: an in-flight call (the owner's ``PushTask`` to a worker) fails only when the
#: channel's keepalive ping goes unanswered, ``grpc_client_keepalive_time_ms`` +
#: ``grpc_client_keepalive_timeout_ms`` after the last frame (2.60 defaults 300 000 + 120 000,
#: ``ray_config_def.h``). Every Ray gRPC server accepts pings that often
#: (``GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS`` = min(60 s, client time)).
GRPC_KEEPALIVE_TIME_MS = 5000
GRPC_KEEPALIVE_TIMEOUT_MS = 5000
FAST_GRPC_KEEPALIVE = {
    "RAY_grpc_client_keepalive_time_ms": str(GRPC_KEEPALIVE_TIME_MS),
    "RAY_grpc_client_keepalive_timeout_ms": str(GRPC_KEEPALIVE_TIMEOUT_MS),
}

#: ``ray start`` on a worker tries the GCS ``RAY_NUM_REDIS_GET_RETRIES`` times (default 20,
#: ``ray_constants.py``); each try waits ``gcs_rpc_server_connect_timeout_s`` (default 5) twice,
#: for the GCS channel and for the observability pubsub channel (``rpc_client.h``), then
#: ``py_gcs_connect_timeout_s`` (default 30) for the cluster id (``GcsClient``), then sleeps 1 s
#: (``node.py`` ``_init_gcs_client``): 20 x 41 s = 13.7 min by default, 3 x (2 + 2 + 5 + 1) =
#: 30 s with these. Every Python GCS client reads the last two: give them only to a node that
#: must not join.
GCS_CONNECT_TRIES = 3
GCS_CHANNEL_TIMEOUT_S = 2
GCS_CLUSTER_ID_TIMEOUT_S = 5
FAST_GCS_CONNECT = {
    "RAY_NUM_REDIS_GET_RETRIES": str(GCS_CONNECT_TRIES),
    "RAY_gcs_rpc_server_connect_timeout_s": str(GCS_CHANNEL_TIMEOUT_S),
    "RAY_py_gcs_connect_timeout_s": str(GCS_CLUSTER_ID_TIMEOUT_S),
}

#: Work re-run after a node is DEAD (restart an actor, re-execute a task, rebuild an object)
#: needs a fresh worker process: ~1.5 CPU-seconds of imports. Ray documents no window for it;
#: the bound only separates "recovers" from "does not". Observed 0.5-3.5 s past DEAD idle,
#: 21.3 s (TASK-05) and 30.7 s (ACTOR-05) after the kill at load average 40+ on 2 cores.
AFTER_DEATH_S = 30.0

#: The presets a named topology may list under ``"knob_presets"``, by name.
PRESETS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "fast-health-checks": FAST_HEALTH_CHECKS,
        "gcs-reconnect": GCS_RECONNECT,
        "fast-grpc-keepalive": FAST_GRPC_KEEPALIVE,
        "fast-gcs-connect": FAST_GCS_CONNECT,
    }
)
