"""The Allure result of a raychaos test whose pytest-xdist worker died mid-test.

allure-pytest writes a result at the end of the test protocol, so a worker killed mid-test
(SIGKILL, the OOM killer, ``os._exit``, a segfault) leaves none. Each worker records
:func:`item_facts` of its raychaos tests at collection (the manifest); on a crash the
controller turns the facts into a ``broken`` result (:func:`crash_result`) carrying the
labels and the identity the test would have had.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from chaos.plugin.results import identity
from chaos.plugin.results.item_labels import labels_of
from chaos.report.claims import PARAMETER
from chaos.report.trials import TRIAL


def item_facts(item: pytest.Item, ray_version: str, engine: str) -> dict[str, Any]:
    """Everything of raychaos test ``item``'s Allure result known at collection, as JSON
    (``engine``: the one its process is planned to boot on).

    Labels of allure decorators, tags and default suites as allure-pytest adds them, then
    raychaos' own (:func:`chaos.plugin.results.item_labels.labels_of`). The name is
    ``item.name`` with the claim ids in front, as set-up titles it; with an ``@allure.title``
    it stays ``item.name`` (that title may format fixture values, unknown until set-up).
    """
    ours = labels_of(item, ray_version, engine)
    name = identity.full_name(item)
    params = identity.params_of(item)
    # A trial is an excluded parameter: the trials of a test share its history.
    trial = params.pop(TRIAL, None)
    labels = [
        *ours.labels,
        *identity.marker_labels(item),
        *(("tag", t) for t in identity.tags(item)),
        *identity.suite_labels(item),
        ("framework", "pytest"),
        ("language", identity.platform_label()),
        ("package", identity.NodeId.parse(item.nodeid).package),
    ]
    parameters: list[dict[str, Any]] = [
        {"name": k, "value": identity.represent(v)} for k, v in params.items()
    ]
    parameters.append(
        {"name": PARAMETER, "value": identity.represent(ours.ray_version), "excluded": True}
    )
    if trial is not None:
        parameters.append({"name": TRIAL, "value": identity.represent(trial), "excluded": True})
    links = [{"type": "link", "url": url, "name": title} for url, title in ours.links]
    fixtures = set(getattr(item, "fixturenames", ()))
    links += [{"type": t, "url": u, "name": n} for t, u, n in identity.marker_links(item)]
    return {
        "name": ours.title or item.name,
        "fullName": name,
        "historyId": identity.history_id(name, params),
        "testCaseId": identity.case_id(name),
        "titlePath": identity.title_path(item),
        "description": identity.description(item),
        "descriptionHtml": identity.description_html(item),
        "labels": [{"name": n, "value": v} for n, v in labels],
        "links": links,
        "parameters": parameters,
        # Not part of the result: what the controller needs to say how to replay it.
        CRASH_FACTS: {"seed": "raychaos_seed" in fixtures},
    }


#: The key of :func:`item_facts` that is not written into the result.
CRASH_FACTS = "raychaos"


@dataclass(frozen=True)
class Replay:
    """What a crashed test's result carries to replay it: the run's seed (when the test
    drew its schedule from it) and the history its worker checkpointed, if any."""

    seed: int | None = None
    #: The history file the worker wrote last, copied into the results as an attachment.
    history_source: str | None = None


def crash_result(
    nodeid: str,
    facts: Mapping[str, Any],
    message: str,
    worker: str,
    start: int,
    stop: int,
    replay: Replay = Replay(),
) -> dict[str, Any]:
    """A ``broken`` Allure result for test ``nodeid``, whose worker died, from its facts."""
    ours = dict(facts.get(CRASH_FACTS) or {})
    seed = replay.seed if ours.get("seed") else None
    command = f"pytest -p no:xdist '{nodeid}'" + (f" --raychaos-seed {seed}" if seed else "")
    parameters = list(facts.get("parameters") or [])
    if seed is not None:
        parameters.append({"name": "seed", "value": str(seed), "excluded": True})
    attachments = (
        [{"name": "history (last checkpoint)", "source": replay.history_source,
          "type": "application/json"}]
        if replay.history_source
        else []
    )  # fmt: skip
    labels = [
        *facts.get("labels", []),
        {"name": "host", "value": socket.gethostname()},
        {"name": "thread", "value": worker},
    ]
    return {
        # Allure's writer drops empty fields the same way.
        **{k: v for k, v in facts.items() if (v or v is False) and k != CRASH_FACTS},
        "parameters": parameters,
        "attachments": attachments,
        "uuid": str(uuid.uuid4()),
        "status": "broken",
        "stage": "finished",
        "statusDetails": {
            "message": f"{message} (replay: {command})",
            "trace": (
                f"{message}\n\nThe pytest-xdist worker {worker} running {nodeid} died before "
                "the test finished (SIGKILL, the OOM killer, os._exit or a segfault), so "
                "pytest and allure-pytest recorded nothing; the raychaos controller wrote this "
                "result.\nTry: rerun the test alone (" + command + ") and look for the OOM "
                "killer in `dmesg`."
                + (" The history attached is the worker's last checkpoint." if attachments else "")
            ),
        },
        "start": start,
        "stop": stop,
        "labels": labels,
    }
