"""Clear errors for an unreachable daemon and for a Ray version that has no wheels."""

from __future__ import annotations

import pytest

from chaos.backends.docker.client import connect
from chaos.cli import main
from chaos.errors import ChaosError, DockerUnavailable


def test_unreachable_daemon_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as info:
        connect(timeout=5)
    text = str(info.value)
    assert "unix:///nonexistent/docker.sock" in text
    assert "DOCKER_HOST" in text and "docker info" in text
    assert isinstance(info.value, ChaosError)


def test_cli_prints_one_error_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(["sweep"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("raychaos: error: cannot reach the Docker daemon")
    assert len(err.splitlines()) == 1


def test_cli_rejects_a_malformed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["image", "build", "--ray-version", "latest"])
    assert info.value.code == 2
    assert "a Ray release such as '2.60.0'" in capsys.readouterr().err
