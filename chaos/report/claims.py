"""Claim ids (``shared/CLAIMS.md``) → Allure structure: feature, documentation link, severity."""

from __future__ import annotations

from dataclasses import dataclass

DOCS = "https://docs.ray.io/en/latest/ray-core"


@dataclass(frozen=True)
class Family:
    feature: str
    doc: str
    #: Allure severity by blast radius: the cluster, a node, or one task/actor/object.
    severity: str


FAMILIES = {
    "TASK": Family("Tasks", f"{DOCS}/fault_tolerance/tasks.html", "normal"),
    "OBJ": Family("Objects", f"{DOCS}/fault_tolerance/objects.html", "normal"),
    "ACTOR": Family("Actors", f"{DOCS}/fault_tolerance/actors.html", "normal"),
    "NODE": Family("Nodes and raylets", f"{DOCS}/fault_tolerance/nodes.html", "critical"),
    "GCS": Family("Head and GCS", f"{DOCS}/fault_tolerance/gcs.html", "blocker"),
    "NET": Family("Network", f"{DOCS}/fault_tolerance/nodes.html", "critical"),
    "STORE": Family("Object store", f"{DOCS}/objects/object-spilling.html", "normal"),
    "OOM": Family("Memory", f"{DOCS}/scheduling/ray-oom-prevention.html", "critical"),
    "VER": Family("Version skew", "https://docs.ray.io/en/latest/cluster/faq.html", "critical"),
    "SCHED": Family("Scheduling", f"{DOCS}/scheduling/index.html", "normal"),
    "PEND": Family("Pending work", f"{DOCS}/scheduling/index.html", "normal"),
    "TENANT": Family("Multi-tenancy", f"{DOCS}/namespaces.html", "normal"),
    "ADVICE": Family("Runbook advice", f"{DOCS}/configure.html", "minor"),
    "INV": Family("Invariants", f"{DOCS}/fault_tolerance.html", "normal"),
}


def family(claim: str) -> Family:
    prefix = claim.split("-", 1)[0]
    if prefix not in FAMILIES:
        raise ValueError(
            f"unknown claim id {claim!r}: expected a prefix among {', '.join(FAMILIES)}"
        )
    return FAMILIES[prefix]
