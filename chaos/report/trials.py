"""Names of repeated trials (``--raychaos-trials N``) as the report reads them back.

A trial is a test parameter (:mod:`chaos.plugin.trials`) and an *excluded* Allure parameter:
the N trials of one test share its ``historyId``, and the report reads every result of one
historyId as that test's trials. Here: the id a trial takes (``trial2``), the name without it,
and the trial number in an Allure result's parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: The pytest argument (a fixture) and the excluded Allure parameter naming a test's trial.
TRIAL = "raychaos_trial"
#: ``-trial2`` (or ``trial2-``) inside a test name's ``[...]``: what :func:`untrial` drops.
_IN_NAME = re.compile(r"(?<=[\[-])trial[0-9]+-|-trial[0-9]+(?=[\]-])|\[trial[0-9]+\]")


def trial_id(number: int) -> str:
    return f"trial{number}"


def trial_ids(count: int) -> list[str]:
    """``["trial1", …, "trialN"]``."""
    return [trial_id(n) for n in range(1, count + 1)]


def untrial(name: str) -> str:
    """A test name without its trial: ``test_x[2.60.0-trial2]`` → ``test_x[2.60.0]``."""
    return _IN_NAME.sub("", name)


def trial_of_parameters(parameters: Sequence[Mapping[str, Any]]) -> int | None:
    """The trial number in an Allure result's ``parameters`` (None: not a trial run)."""
    for param in parameters:
        if isinstance(param, Mapping) and param.get("name") == TRIAL:
            value = str(param.get("value", "")).strip("'\"")
            return int(value) if value.isdigit() else None
    return None
