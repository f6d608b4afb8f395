"""Evidence for platform engineers: ``ray status`` text and placement counts in the report.

Measurements land in the history JSON (and Allure's ``measurements``); texts are attached to
Allure when it is installed. Reporting never breaks a run.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from chaos.steps import step

if TYPE_CHECKING:
    from chaos.experiment import Experiment


def attach(name: str, body: Any) -> None:
    """Attach ``body`` (text, or anything JSON-able) to the Allure report, best effort."""
    # Evidence is best effort, the verdict is not.
    with contextlib.suppress(Exception):
        import allure

        text = body if isinstance(body, str) else json.dumps(body, indent=1, default=repr)
        allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)


def record(experiment: Experiment, name: str, value: Any) -> Any:
    """A measurement in the report, also attached as text (``ray status`` reads better so)."""
    experiment.measure(name, value)
    attach(name, value)
    return value


def status_now(experiment: Experiment, name: str) -> str:
    """``ray status`` from the head, recorded as evidence."""
    with step(f"evidence: ray status ({name})"):
        text = experiment.cluster.ray_status()
        record(experiment, f"ray status: {name}", text)
    return text
