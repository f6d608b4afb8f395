"""Interrupt-aware teardown without Docker: the signal handlers and the experiment fixture's
short path (no heal, postconditions or evidence, no wait for the observer)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

HANDLERS = """
import os, signal, sys
from chaos.plugin import interrupts

mine = lambda signum, frame: None
if sys.argv[1] == "foreign":
    signal.signal(signal.SIGTERM, mine)
interrupts.install_handlers()
interrupts.install_handlers()  # twice: still one handler, no chain
print(signal.getsignal(signal.SIGTERM) is mine, end=" ")
for signum in (signal.SIGINT, signal.SIGTERM):
    interrupts.INTERRUPTED.clear()
    try:
        os.kill(os.getpid(), signum)
        signal.sigtimedwait([], 0) if hasattr(signal, "sigtimedwait") else None
        print("ignored", end=" ")
    except KeyboardInterrupt:
        print("interrupt" if interrupts.INTERRUPTED.is_set() else "unflagged", end=" ")
"""


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("plain", "False interrupt interrupt", id="defaults-replaced"),
        # Someone else's SIGTERM handler stays theirs (and does not flag an interrupt).
        pytest.param("foreign", "True interrupt ignored", id="foreign-handler-kept"),
    ],
)
def test_sigint_and_sigterm_flag_the_interrupt_and_unwind(mode: str, expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", HANDLERS, mode],
        capture_output=True,
        text=True,
        timeout=60,
        # As from a terminal: an xdist worker ignores SIGINT and its children inherit that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.stdout.strip() == expected, done.stderr


CONFTEST = """
import time
from pathlib import Path

import pytest

import chaos.observer.observer


class SlowObserver:
    def __init__(self, cluster):
        pass

    def start(self):
        return self

    def wait_first_sample(self, timeout):
        return True

    def stop(self):
        time.sleep(30)  # a stream that takes long to end
        Path("observer-stopped").touch()


chaos.observer.observer.Observer = SlowObserver


class Nemesis:
    def heal_all(self):
        Path("healed").touch()


class Spec:
    boot_timeout_s = 1


class Cluster:
    spec = Spec()


@pytest.fixture
def ray_cluster():
    return Cluster()


@pytest.fixture
def nemesis(ray_cluster):
    return Nemesis()
"""

INTERRUPTED_TEST = """
from chaos.plugin import interrupts

def test_interrupted(experiment):
    interrupts.INTERRUPTED.set()  # what the handlers do on SIGINT/SIGTERM
    raise KeyboardInterrupt
"""


def test_an_interrupted_experiment_skips_heal_checks_evidence_and_the_observer_wait(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_it=INTERRUPTED_TEST)
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    took = time.monotonic() - started
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / "healed").exists(), "no heal: the cluster is removed anyway"
    assert not (pytester.path / "reports").exists(), "no evidence"
    assert took < 25, f"teardown waited for the observer ({took:.0f} s)"
