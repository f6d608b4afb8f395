"""Error paths (issue 24): each ends in one line naming what was expected, what was seen and
what to try, or in a bounded wait. Fake Docker objects stand in for what a daemon cannot be
made to do on demand (hang, time out, fail one removal of several)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import requests

from chaos import labels
from chaos.backends.base import ExecResult
from chaos.backends.docker import execstream
from chaos.backends.docker.backend import DockerBackend
from chaos.backends.docker.client import EngineUnresponsive, translated
from chaos.backends.docker.images import process
from chaos.cli import main
from chaos.cluster.cluster import Cluster
from chaos.errors import ChaosError, DockerOperationError, ImageBuildError, SpecError, WorkloadError
from chaos.plugin.factory import ClusterFactory, TeardownError
from chaos.spec import topology as spec_module
from chaos.spec.topology import ClusterSpec, load_topology


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# -- ClusterFactory.teardown ----------------------------------------------------------------
class FakeCluster:
    def __init__(self, key: str, fail: Exception | None = None) -> None:
        self.backend = SimpleNamespace(key=key)
        self.spec = ClusterSpec()
        self.fail = fail
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        if self.fail is not None:
            raise self.fail


def factory(clusters: list[FakeCluster]) -> ClusterFactory:
    made = ClusterFactory(
        SimpleNamespace(node=SimpleNamespace(nodeid="t.py::test_x")),  # type: ignore[arg-type]
        client=None,  # type: ignore[arg-type]
        identity=None,  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        settings=SimpleNamespace(keep=False),  # type: ignore[arg-type]
        workload_paths=(),
    )
    made.clusters = clusters  # type: ignore[assignment]
    return made


def test_teardown_removes_every_cluster_whatever_fails_and_names_each_failure() -> None:
    broken = FakeCluster("c1", KeyError("backend bug"))
    fine = FakeCluster("c2")
    docker = FakeCluster("c3", DockerOperationError("remove container x failed: busy"))
    with pytest.raises(TeardownError) as caught:
        factory([broken, fine, docker]).teardown(failed=False)
    assert broken.stopped and fine.stopped and docker.stopped  # none was skipped
    text = one_line(caught.value)
    assert text.startswith("removing 2 clusters failed: c3: remove container x failed: busy; ")
    assert "c1: KeyError: 'backend bug'" in text
    assert "raychaos sweep" in (caught.value.hint or "")


def test_teardown_with_one_failure_raises_it_as_it_is() -> None:
    failure = DockerOperationError("teardown left objects behind: volume v: busy")
    with pytest.raises(DockerOperationError) as caught:
        factory([FakeCluster("c1"), FakeCluster("c2", failure)]).teardown(failed=False)
    assert caught.value is failure


# -- exec bounds ------------------------------------------------------------------------------
class Hung:
    """An exec output stream from an engine that never ends it (until closed)."""

    def __init__(self, first: bytes = b"") -> None:
        self.first = first
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        if self.first:
            yield self.first
        self.closed.wait(30)

    def close(self) -> None:
        self.closed.set()


class FakeApi:
    def __init__(self, output: Any) -> None:
        self.output = output
        self.created: list[list[str]] = []

    def exec_create(self, container: str, argv: list[str], **_: Any) -> dict[str, str]:
        self.created.append(argv)
        return {"Id": "e1"}

    def exec_start(self, exec_id: str, **kwargs: Any) -> Any:
        assert kwargs.get("stream") is True, "the host bounds the wait only on a stream"
        return self.output

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"Running": False, "ExitCode": 0}


class FakeContainer:
    id = "cid"
    name = "k-worker-1"

    def __init__(self, reload_error: Exception | None = None) -> None:
        self.attrs: dict[str, Any] = {}
        self.reload_error = reload_error
        self.status = "running"

    def reload(self) -> None:
        if self.reload_error is not None:
            raise self.reload_error


def backend_with(output: Any = (), container: FakeContainer | None = None) -> DockerBackend:
    client = SimpleNamespace(api=FakeApi(output))
    backend = DockerBackend(
        client,  # type: ignore[arg-type]
        builder=None,  # type: ignore[arg-type]
        identity=labels.RunIdentity(run_id="r1"),
        key="k",
    )
    backend.containers["worker-1"] = container or FakeContainer()  # type: ignore[assignment]
    return backend


def test_an_exec_bound_under_half_a_second_is_one_second_not_unlimited() -> None:
    backend = backend_with([b"ok\n"])
    assert backend.exec("worker-1", ["true"], timeout=0.3, env={}).output == "ok\n"
    api = cast(FakeApi, backend.client.api)  # backend_with's client is a namespace over a FakeApi
    assert api.created[0][:3] == ["timeout", "--kill-after=5", "1"]
    assert execstream.in_node_bound(120.2) == 121
    with pytest.raises(WorkloadError) as caught:
        execstream.in_node_bound(0)
    assert "exec bound: expected a number of seconds > 0, got 0" in one_line(caught.value)


def test_a_long_in_node_bound_is_waited_for_beyond_the_http_clients_timeout() -> None:
    # The host waits for the exec's end above the in-node bound and its kill grace, never
    # the client's 120 s: docker-py's read has no timeout of its own (it polls first).
    assert execstream.host_bound(300) >= 300 + execstream.KILL_AFTER_S
    assert execstream.host_bound(0.2) > 1 + execstream.KILL_AFTER_S


def test_an_exec_on_a_hung_engine_ends_in_one_line_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(execstream, "KILL_AFTER_S", 0)
    monkeypatch.setattr(execstream, "HOST_MARGIN_S", 0.5)
    hung = Hung(b"partial")
    started = time.monotonic()
    with pytest.raises(EngineUnresponsive) as caught:
        backend_with(hung).exec("worker-1", ["sleep", "9"], timeout=0.2, env={})
    assert time.monotonic() - started < 5
    assert hung.closed.is_set(), "the stream is closed, so its reader thread ends"
    text = one_line(caught.value)
    assert text.startswith("exec sleep in k-worker-1: expected its output to end within 2 s")
    assert "got 7 bytes and no end" in text
    assert "docker info" in (caught.value.hint or "")


def test_a_read_timeout_of_the_http_client_is_one_line() -> None:
    with pytest.raises(EngineUnresponsive) as caught, translated("inspect k-worker-1"):
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=120)")
    text = one_line(caught.value)
    assert text.startswith("inspect k-worker-1 failed: expected the Docker daemon to answer")
    assert "read timeout=120" in text and "docker info" in text


def test_the_state_of_a_node_on_a_hung_engine_is_one_line_and_gone_is_gone() -> None:
    import docker.errors

    slow = FakeContainer(requests.exceptions.ReadTimeout("Read timed out. (read timeout=120)"))
    with pytest.raises(EngineUnresponsive) as caught:
        backend_with(container=slow).state("worker-1")
    assert "inspect k-worker-1 failed" in one_line(caught.value)
    refused = FakeContainer(docker.errors.APIError("500 Server Error", explanation="boom"))
    with pytest.raises(DockerOperationError):
        backend_with(container=refused).state("worker-1")
    gone = FakeContainer(docker.errors.NotFound("no such container"))
    assert backend_with(container=gone).state("worker-1") == "gone"


# -- the image builder ------------------------------------------------------------------------
def test_a_killed_step_whose_output_a_runaway_holds_open_still_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "KILLED_OUTPUT_WAIT_S", 0.5)
    pidfile = tmp_path / "runaway.pid"
    # The runaway leaves the step's process group (setsid) and keeps its stdout open.
    script = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 60"
    started = time.monotonic()
    try:
        with pytest.raises(ImageBuildError) as caught:
            process.run_bounded(
                ["sh", "-c", script],
                step="debootstrap bookworm",
                bound_s=0.5,
                bound_name="DEBOOTSTRAP_TIMEOUT_S",
                hint="check the mirror",
            )
        assert time.monotonic() - started < 10
        text = one_line(caught.value)
        assert "debootstrap bookworm did not finish within 0 s (DEBOOTSTRAP_TIMEOUT_S)" in text
        assert "a process that left its process group still holds it" in text
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_step_that_ends_in_time_gives_its_output() -> None:
    done = process.run_bounded(
        ["sh", "-c", "echo out; echo err >&2"], step="s", bound_s=10, bound_name="B", hint="h"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")


# -- Cluster.signal ---------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(
        self,
        node: str,
        argv: Sequence[str],
        *,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        self.calls.append(list(argv))
        return ExecResult(exit_code=0, output="")


def test_a_signal_name_never_reaches_a_shell(tmp_path: Path) -> None:
    # A namespace passes for a Backend (its __getattr__ answers any member); exec is recorded.
    cluster = Cluster(ClusterSpec(), backend=SimpleNamespace())
    recorder = Recorder()
    cluster.exec = recorder  # type: ignore[method-assign]  # the fake stands in for the method
    cluster.signal("go-1.b", node="head")
    argv = recorder.calls[0]
    assert argv[:2] == ["sh", "-c"] and "go-1.b" not in argv[2]
    assert argv[-2:] == ["/raychaos/state/signals", "go-1.b"]
    # The script itself, run by a real shell: the file is made, nothing else happens.
    subprocess.run([*argv[:4], str(tmp_path / "signals"), "go-1.b"], check=True)
    assert os.listdir(tmp_path / "signals") == ["go-1.b"]
    for bad in ("a; touch /tmp/x", "../escape", ".hidden", "", "a/b", "x" * 200):
        with pytest.raises(WorkloadError) as caught:
            cluster.signal(bad, node="head")
        assert "signal name: expected a file name" in one_line(caught.value)
    assert len(recorder.calls) == 1


# -- topology files ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seen"),
    [
        (b'{"workers": 2,}', "Expecting property name enclosed in double quotes at line 1"),
        (b"[1, 2]", "a JSON list"),
        (b'{"workers": "\xff"}', "codec can't decode byte 0xff"),
    ],
)
def test_a_malformed_topology_is_one_spec_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes, seen: str
) -> None:
    monkeypatch.setattr(spec_module, "topologies_dir", lambda: tmp_path)
    (tmp_path / "bad.json").write_bytes(text)
    with pytest.raises(SpecError) as caught:
        load_topology("bad")
    message = one_line(caught.value)
    assert message.startswith("topology bad: expected a ")
    assert seen in message and str(tmp_path / "bad.json") in message


# -- the command line -------------------------------------------------------------------------
def test_claims_with_an_empty_pattern_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["claims", ""]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("raychaos: error: claims: expected an id or pattern")
    assert "`raychaos claims` with no argument" in err and len(err.splitlines()) == 1


def test_report_refuses_a_directory_without_raychaos_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    plain = {"uuid": "u1", "name": "test_plain", "status": "passed", "start": 1, "stop": 2}
    (results / "u1-result.json").write_text(json.dumps(plain))
    page = tmp_path / "r.html"
    assert main(["report", str(results), "-o", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"raychaos: error: {results} holds no raychaos results")
    assert "--alluredir" in err and len(err.splitlines()) == 1
    assert not page.exists()
    assert main(["report", str(tmp_path / "empty-and-missing"), "-o", str(page)]) == 2


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["image", "build", "--python", "python3"], "expected a Python version such as 3.11"),
        (["image", "build", "--python", "3"], "got '3'"),
        (["bench", "processes", "--duration", "0"], "expected a number of seconds > 0"),
        (["bench", "processes", "--duration", "nan"], "got 'nan'"),
        (["bench", "processes", "--duration", "soon"], "got 'soon'"),
        (["sweep", "--older-than", "soon"], "expected a duration such as 6h, 2d"),
        (["sweep", "--older-than", "0h"], "expected a duration > 0"),
    ],
)
def test_numbers_and_versions_on_the_command_line_are_checked(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert said in capsys.readouterr().err


def test_the_command_line_accepts_what_it_documents() -> None:
    from chaos.backends.docker.sweep import parse_age
    from chaos.cli import build_parser

    assert build_parser().parse_args(["image", "build", "--python", "3.11"]).python == "3.11"
    parsed = build_parser().parse_args(["bench", "processes", "--duration", "2.5"])
    assert parsed.duration == 2.5
    assert [parse_age(a) for a in ("90", "90m", "6h", "2d", "1w", "1h30m")] == [
        90,
        5400,
        21600,
        172800,
        604800,
        5400,
    ]


def test_errors_are_chaos_errors() -> None:
    assert issubclass(EngineUnresponsive, ChaosError)
    assert issubclass(TeardownError, ChaosError)
