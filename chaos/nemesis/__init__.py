"""The nemesis role: faults that prove they happened and always heal.

``base`` holds the contract (:class:`Fault`, :class:`Together`) and the runner that keeps it;
``process``, ``host``, ``network`` and ``resources`` hold one small class per fault; ``targets``
finds nodes by Ray role; ``nemesis`` is the facade experiments call (``nemesis.kill_node``…).
"""

from chaos.nemesis.base import Fault, Together
from chaos.nemesis.exhaustion import FillDisk, MemoryPressure
from chaos.nemesis.host import KillNode, PauseNode, RestartNode, StopNode
from chaos.nemesis.nemesis import Nemesis, nemesis_for
from chaos.nemesis.network import Degrade, Partition
from chaos.nemesis.process import KillGcs, KillRaylet, KillWorker

__all__ = [
    "Degrade",
    "Fault",
    "FillDisk",
    "KillGcs",
    "KillNode",
    "KillRaylet",
    "KillWorker",
    "MemoryPressure",
    "Nemesis",
    "Partition",
    "PauseNode",
    "RestartNode",
    "StopNode",
    "Together",
    "nemesis_for",
]
