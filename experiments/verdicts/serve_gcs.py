"""SERVE-06 as a pure verdict: serving through a GCS outage, and an update made during it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from chaos.testing import Finding, Judging, verdict

from .serve_traffic import (
    Load,
    no_failures_sent,
)


class UpdatedDuringOutage(Finding):
    """SERVE-06: a deployment update made while the GCS was down took effect (or its call
    returned) before the head was back; Ray's docs say one "can't update" then."""

    claims: ClassVar[tuple[str, ...]] = ("SERVE-06",)


class UpdateNotCompleted(Finding):
    """SERVE-06: an update that waited through the outage (Serve's KV calls "hang until the
    GCS recovers" without RAY_SERVE_KV_TIMEOUT_S) did not complete, or was not applied, once
    the head was back ("the cluster returns to normal behavior")."""

    claims: ClassVar[tuple[str, ...]] = ("SERVE-06",)


# -- SERVE-06: GCS fault tolerance on Redis -----------------------------------------------------


@dataclass(frozen=True)
class Outage:
    """SERVE-06's times: the GCS killed, the head restarted and back, the controller
    recovered (ALIVE on the new head, the same replicas); and the bound on the update's
    completion after the head's return."""

    gcs_at: float
    restart_at: float
    back_at: float
    recovered_at: float
    recover_s: float
    update_s: float


@verdict("SERVE-06")
def served_through_outage(
    j: Judging,
    load: Load,
    update: Mapping[str, Any],
    outage: Outage,
    targets: Sequence[str],
    same_controller: bool,
) -> str:
    """Through the workers' proxies no request sent from the GCS's death to the controller's
    recovery failed, and the same controller actor came back; the update made during the
    outage followed Ray's docs (:func:`_update_judged`)."""
    j.require(same_controller, "the controller came back as another actor, not the same restarted")
    for name, (t0, t1) in {
        "during the outage": (outage.gcs_at, outage.restart_at),
        "while the head restarts": (outage.restart_at, outage.recovered_at),
    }.items():
        j.measure(
            f"SERVE-06 requests answered {name}",
            {t: len([x for x in load["targets"][t]["ok_at"] if t0 <= x <= t1]) for t in targets},
        )
    no_failures_sent(j, "SERVE-06", load, targets, (outage.gcs_at, outage.recovered_at))
    how = _update_judged(j, update, outage)
    return (
        "no request failed through the workers' proxies, the same replicas after recovery; "
        f"the update {how}"
    )


def _update_judged(j: Judging, seen: Mapping[str, Any], outage: Outage) -> str:
    """The update made during the outage, against Ray's docs (serve/production-guide/
    fault-tolerance): while the head recovers "you can't update", and without
    ``RAY_SERVE_KV_TIMEOUT_S`` Serve's KV operations "hang until the GCS recovers"; once it
    has, "the cluster returns to normal behavior". So: the call neither returned nor took
    effect while the GCS was down (``other`` still answered ``v1`` only through the workers'
    proxies), it did not return before the head was restarted, and it returned (not raised)
    within the bound of the head's return, applied: ``v2`` answers, ``other`` RUNNING."""
    during, final = seen["during"], seen["final"]
    versions = seen["versions_during"]["versions"]
    j.measure("SERVE-06 update: how it stood during the outage", during)
    j.measure("SERVE-06 other's versions during the outage", seen["versions_during"])
    j.measure("SERVE-06 update: how it ended", final)
    j.measure("SERVE-06 other's versions after recovery", seen["versions_after"])
    j.measure("SERVE-06 update: other's status after recovery", seen["status_after"])
    if not versions.get("v1"):
        j.unknown(
            "``other`` did not answer through the workers' proxies during the outage, so "
            f"whether the update took effect is unknown: {seen['versions_during']}"
        )
    returned_at = final.get("returned_at")
    j.require(
        "returned_at" not in during and not versions.get("v2"),
        f"the update took effect while the GCS was down: call {during}, ``other`` answered "
        f"{versions} {outage.update_s} s into the outage",
        UpdatedDuringOutage,
    )
    j.require(
        not (isinstance(returned_at, int | float) and returned_at < outage.restart_at),
        f"the update's call returned before the head was restarted: {final}",
        UpdatedDuringOutage,
    )
    after = seen["versions_after"]["versions"]
    if "raised" in during:
        # Failing fast is "can't update" too; such a call must leave ``other`` as it was.
        j.measure("SERVE-06 update: raised during the outage", during["raised"])
        j.require(
            not after.get("v2"),
            f"an update that raised was applied anyway: {after}",
            UpdateNotCompleted,
        )
        return "raised during the outage and left ``other`` as it was"
    if not during.get("waiting"):
        j.unknown(f"the update's state during the outage is unknown: {during}")
    j.require(
        not (final.get("waiting") or "raised" in final or returned_at is None),
        f"the update that waited through the outage did not complete within "
        f"{outage.recover_s} s of the head's return: {final}",
        UpdateNotCompleted,
    )
    window = j.measure(
        "SERVE-06 head back → the update's call returned (s)",
        round(float(returned_at) - outage.back_at, 2),
        band=(outage.restart_at - outage.back_at, outage.recover_s),
        start=outage.back_at,
    )
    j.require(
        window <= outage.recover_s,
        f"the update returned {window} s after the head was back (bound {outage.recover_s} s)",
        UpdateNotCompleted,
    )
    status = (seen.get("status_after") or {}).get("status")
    j.require(
        not after.get("v1") and bool(after.get("v2")) and status == "RUNNING",
        f"the update returned but ``other`` answers {after} (status {status}): "
        f"{seen['status_after']}",
        UpdateNotCompleted,
    )
    return "waited through the outage and was applied once the head was back"
