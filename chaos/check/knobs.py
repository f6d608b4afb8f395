"""Ray knobs the experiments shorten, so the suite stays fast. Each experiment says which it uses.

This module is the one source of these values: experiments pass them to
``@pytest.mark.cluster(env=...)``, and a named topology (``fixtures/clusters/*.json``) lists
them by name under ``"knob_presets"`` (see :data:`PRESETS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Health checks as in Ray's own Docker tests: a dead node is DEAD in ~2-4 s instead of ~14 s.
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}

#: Raylets and drivers give up on an unreachable GCS after this long (default 60 s).
GCS_RECONNECT_S = 20
GCS_RECONNECT = {"RAY_gcs_rpc_server_reconnect_timeout_s": str(GCS_RECONNECT_S)}

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
    }
)
