"""Boot slots: a machine-wide limit on clusters booting at once, released when a holder dies."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chaos.cluster.boot_slots import boot_slot, default_slots
from chaos.errors import ClusterBootTimeout


def test_default_is_one_booting_cluster_per_two_cores() -> None:
    assert default_slots() >= 1


def test_a_second_booter_queues_until_the_first_is_done(tmp_path: Path) -> None:
    order: list[str] = []
    first_in = threading.Event()

    def second() -> None:
        first_in.wait(10)
        with boot_slot(tmp_path, 1) as queued:
            order.append(f"second after {queued:.1f}s")

    thread = threading.Thread(target=second)
    thread.start()
    with boot_slot(tmp_path, 1) as queued:
        assert queued < 1
        first_in.set()
        time.sleep(0.6)  # the hold being measured, not a wait for a condition
        order.append("first done")
    thread.join(10)
    assert order[0] == "first done"
    assert float(order[1].split()[-1].rstrip("s")) >= 0.5, order


def test_two_slots_admit_two_at_once(tmp_path: Path) -> None:
    with boot_slot(tmp_path, 2) as a, boot_slot(tmp_path, 2) as b:
        assert a < 1 and b < 1


def test_queueing_too_long_is_a_clear_error(tmp_path: Path) -> None:
    with (
        boot_slot(tmp_path, 1),
        pytest.raises(ClusterBootTimeout) as info,
        boot_slot(tmp_path, 1, max_queue_s=0.5),
    ):
        pass
    assert "--raychaos-boot-slots" in str(info.value)


def test_a_killed_holder_frees_its_slot(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from chaos.cluster.boot_slots import boot_slot\n"
            "with boot_slot(Path(sys.argv[1]), 1):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ClusterBootTimeout), boot_slot(tmp_path, 1, max_queue_s=0.5):
        pass
    holder.kill()
    holder.wait(10)
    with boot_slot(tmp_path, 1, max_queue_s=5) as queued:
        assert queued < 5
