"""A lane's tasks as Ray itself counts them: the State API's attempts (retries by the failed
attempt's error, rebuilds of lost objects, where each ran) and the owner's log lines that
resubmit a finished task (``workloads.churn:steady``'s evidence).
"""

from __future__ import annotations

from typing import Any

from workloads.tasks import owner_log

#: The owner's log line for a rebuild (``TaskManager::ResubmitTask``, task_manager.cc).
RESUBMITTED = "Resubmitting task that produced lost plasma object"


#: The most rows the State API returns for one query (RAY_MAX_LIMIT_FROM_API_SERVER, 10 000:
#: ray/util/state/common.py).
STATE_ROWS = 10_000


def attempts(name: str) -> dict[str, Any]:
    """From the State API, the tasks called ``name`` (each listed once per attempt): how many,
    how many were retried (an attempt above 0 after a failed one), by the failed attempt's
    error type, how many were rebuilt (an attempt after one that had finished: lineage
    reconstruction of a lost object), on which node (Ray node id) each attempt that a retry
    or a rebuild followed had run, and when each attempt ran where (``spans``: per node id,
    start and end in ms, end 0 while running or never recorded)."""
    from ray.util.state import list_tasks

    rows = list_tasks(
        filters=[("name", "=", name)],
        limit=STATE_ROWS,
        timeout=60,
        detail=True,
        raise_on_missing_output=False,
    )
    tried: dict[str, dict[int, tuple[str, str, str]]] = {}
    spans: dict[str, list[list[int]]] = {}
    for row in rows:
        tried.setdefault(str(row.task_id), {})[int(row.attempt_number)] = (
            str(row.state),
            str(row.error_type),
            str(row.node_id),
        )
        if row.node_id and row.start_time_ms:
            spans.setdefault(str(row.node_id), []).append(
                [int(row.start_time_ms), int(row.end_time_ms or 0)]
            )
    causes: dict[str, int] = {}
    where: dict[str, int] = {}
    retried = rebuilt = 0
    for attempts in tried.values():
        before = [b for n in attempts if n > 0 and (b := attempts.get(n - 1)) is not None]
        failed = [b for b in before if b[0] == "FAILED"]
        lost = [b for b in before if b[0] == "FINISHED"]
        retried += bool(failed)
        rebuilt += bool(lost)
        for state, cause, node in failed + lost:
            key = cause if state == "FAILED" else "rebuilt"
            causes[key] = causes.get(key, 0) + 1
            where[node] = where.get(node, 0) + 1
    return {
        "tasks": len(tried),
        "attempts": len(rows),
        # The State API returns at most 10 000 rows (its limit): more attempts than that
        # are not all counted (the ten-minute run's nested children).
        "truncated": len(rows) >= STATE_ROWS,
        "later_attempts": sum(1 for a in tried.values() if max(a) > 0),
        "retried": retried,
        "causes": causes,
        "rebuilt": rebuilt,
        "where": where,
        "spans": spans,
    }


def resubmitted(name: str) -> dict[str, Any]:
    """This driver's log lines that resubmit a finished task of ``name`` to rebuild its lost
    object (Ray's own words, ``RESUBMITTED``)."""
    path = owner_log()
    lines: list[str] = []
    if path:
        with open(path, errors="replace") as log:
            lines = [x for x in log if RESUBMITTED in x]
    ours = [x for x in lines if name in x or "function_name=_create" in x]
    return {"lines": len(ours), "all": len(lines), "first": ours[0][:400] if ours else None}
