"""An experiment: its kit (:mod:`~chaos.experiment.kit`) and the context manager that ends it
with the postconditions and the evidence (:mod:`~chaos.experiment.run`), usable without pytest;
and a team's workload under the nightly killer (:mod:`~chaos.experiment.killer`).
"""

from chaos.experiment.killer import KillerRun, under_killer
from chaos.experiment.kit import POSTCONDITIONS, Experiment
from chaos.experiment.run import Callbacks, EvidenceWriter, history_only, run_experiment

__all__ = [
    "POSTCONDITIONS",
    "Callbacks",
    "EvidenceWriter",
    "Experiment",
    "KillerRun",
    "history_only",
    "run_experiment",
    "under_killer",
]
