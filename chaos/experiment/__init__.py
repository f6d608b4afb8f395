"""An experiment: its kit (:mod:`~chaos.experiment.kit`) and the context manager that ends it
with the postconditions and the evidence (:mod:`~chaos.experiment.run`), usable without pytest.
"""

from chaos.experiment.kit import POSTCONDITIONS, Experiment
from chaos.experiment.run import Callbacks, EvidenceWriter, history_only, run_experiment

__all__ = [
    "POSTCONDITIONS",
    "Callbacks",
    "EvidenceWriter",
    "Experiment",
    "history_only",
    "run_experiment",
]
