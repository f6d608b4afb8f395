"""What every SERVE verdict reads: the HTTP client's record and the controller's clocks.

The client (``workloads.serve_load:load``) reports per proxy the completion time of every answer
(``ok_at``) and every failure's ``sent``/``done`` times; the controller's own log lines are
rows ``{"t", "rule", "groups", "line"}`` (``workloads.serve:logged`` on the head). The
tolerances below come from Serve's source and measurements.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from chaos.testing import Judging

#: Serve stamps its log lines to the millisecond (``logging``'s ``,%f`` cut to 3 digits): a
#: line's time is up to 1 ms before the moment it reports.
STAMP_S = 0.001
#: How late the controller may act on its schedule, per step, beyond Ray's own pacing (the
#: period, the dirty-set sweep, ``CONTROL_LOOP_INTERVAL_S``): a pass's own work and the check
#: RPC's answer. Measured on this 2-core host beside other clusters (docs/evidence/serve.md,
#: "Bounds from the controller's log"): failed proxy checks 0.11-0.32 s later than one period
#: after the previous one (10 gaps, 5 runs). 1 s keeps a skipped check visible (a proxy gap
#: of two periods is 4 s > 2 + 0.1 + 1); a host stalled beyond that is judged inconclusive
#: by ``chaos.check.stalls``, never by widening this.
CONTROLLER_LAG_S = 1.0
#: The controller answers a crash or an unhealthy proxy at once: it stops the replica and
#: adds its replacement (``DeploymentState.check_and_update_replicas``, then
#: ``scale_deployment_replicas``, in one ``DeploymentStateManager.update``; the new actor is
#: started in that pass or the next), or stops the proxy and starts another
#: (``ProxyStateManager.update``). Measured: crash line → "Starting Replica" 0.004-0.16 s,
#: verdict → "Starting proxy" 0.002-0.1 s (5 runs): a pass and its lag at most.
REPLACE_S = CONTROLLER_LAG_S

Load = Mapping[str, Any]


# -- the client's record ------------------------------------------------------------------------


def failures(load: Load, target: str, t0: float, t1: float) -> list[dict[str, Any]]:
    """Failed requests to ``target`` sent in [t0, t1]."""
    found: list[dict[str, Any]] = [
        f for f in load["targets"][target]["failures"] if t0 <= f["sent"] <= t1
    ]
    return found


def longest_gap(load: Load, target: str, t0: float, t1: float) -> float:
    """The longest time in [t0, t1] without a successful answer from ``target``, from the
    client's start at the earliest (a window opened before it is not a gap in service)."""
    t0 = max(t0, float(load.get("started", t0)))
    times: list[float] = sorted(t for t in load["targets"][target]["ok_at"] if t0 <= t <= t1)
    edges = [t0, *times, t1]
    return round(max(b - a for a, b in itertools.pairwise(edges)), 2)


def first_ok(load: Load, target: str, after: float) -> float | None:
    """The first answer from ``target`` after ``after``."""
    return next((t for t in sorted(load["targets"][target]["ok_at"]) if t > after), None)


def no_failures_sent(
    j: Judging,
    label: str,
    load: Load,
    targets: Sequence[str],
    window: tuple[float, float],
    *,
    next_strike: float | None = None,
) -> None:
    """No request to ``targets`` sent in ``window`` failed; the longest gap is measured.

    ``next_strike``: a request still in flight when the next fault struck (sent before it,
    ended after it) is that strike's to judge, not this window's; such failures are measured.
    """
    t0, t1 = window
    failed = {t: failures(load, t, t0, t1) for t in targets}
    if next_strike is not None:
        theirs = {t: [f for f in fs if f["done"] > next_strike] for t, fs in failed.items()}
        j.measure(
            f"{label}: failed in flight at the next strike (judged there)",
            {t: len(f) for t, f in theirs.items()},
        )
        failed = {t: [f for f in fs if f["done"] <= next_strike] for t, fs in failed.items()}
    j.measure(f"{label}: failed requests", {t: len(f) for t, f in failed.items()})
    j.measure(
        f"{label}: longest gap between answers (s)",
        {t: longest_gap(load, t, t0, t1) for t in targets},
    )
    bad = {t: f[:5] for t, f in failed.items() if f}
    j.require(not bad, f"{label}: requests failed through the proxies of {list(bad)}: {bad}")


def trailing_failures(checks: Sequence[tuple[float, bool]]) -> list[float]:
    """The times of the failed checks in a row at the end of ``checks``."""
    run: list[float] = []
    for t, ok in checks:
        run = [] if ok else [*run, t]
    return run
