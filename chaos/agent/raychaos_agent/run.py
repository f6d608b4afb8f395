"""Run ``module:function`` with JSON keyword arguments and report its outcome as events.

    python -m raychaos_agent.run MODULE:FUNCTION '{"kw": 1}'

Exit codes: 0 the function returned (event ``result``); 1 it raised (event ``error`` with the
exception's class, base classes, message and Ray's ``reason`` where it has one); 2 the harness
could not call it (event ``harness_error``): bad target, import error, bad arguments.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback
from typing import Any

from raychaos_agent import emit


def describe(exc: BaseException) -> dict[str, Any]:
    """A JSON description of an exception, enough for the host to assert on its type."""
    attrs: dict[str, Any] = {}
    for name in ("reason", "error_type", "ip", "node_ip", "actor_id", "task_name"):
        value = getattr(exc, name, None)
        if value is not None and not callable(value):
            attrs[name] = value if isinstance(value, int | float | bool) else str(value)
    cause = getattr(exc, "cause", None)
    return {
        "type": type(exc).__name__,
        "bases": [c.__name__ for c in type(exc).__mro__[1:] if c is not object],
        "module": type(exc).__module__,
        "message": str(exc)[:4000],
        "attrs": attrs,
        "cause": describe(cause) if isinstance(cause, BaseException) and cause is not exc else None,
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2 or ":" not in argv[0]:
        emit("harness_error", message=f"usage: run MODULE:FUNCTION JSON_KWARGS, got {argv!r}")
        return 2
    target, raw = argv
    module_name, _, func_name = target.partition(":")
    try:
        kwargs = json.loads(raw)
        function = getattr(importlib.import_module(module_name), func_name)
        inspect.signature(function).bind(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the outcome under test, reported as data
        emit("harness_error", message=f"cannot call {target}: {exc!r}", error=describe(exc))
        return 2
    emit("started", target=target, pid=os.getpid())
    try:
        value = function(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - the outcome under test, reported as data
        emit("error", error=describe(exc))
        return 1
    emit("result", value=value)
    return 0


def _shutdown_ray(timeout: float = 10.0) -> None:
    """Disconnect from Ray, bounded: against a dead GCS, ``ray.shutdown`` can block."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return
    import threading

    worker = threading.Thread(target=ray.shutdown, daemon=True)
    worker.start()
    worker.join(timeout)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    _shutdown_ray()
    sys.stdout.flush()
    # Skip interpreter teardown: Ray's atexit hooks can block on a dead cluster.
    os._exit(code)
