"""`raychaos upgrade-check`: arguments, the pytest command, the flow (no Docker, no pytest run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from chaos.cli import build_parser, main, upgrade
from chaos.cli.upgrade import default_alluredir, pytest_command, upgrade_check
from chaos.errors import ChaosError


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def raychaos(*argv: str) -> int:
    return main(list(argv))


def write_result(directory: Path, name: str, version: str, claim: str, status: str) -> None:
    data = {
        "uuid": f"{name}-{version}",
        "name": f"{name}[{version}]",
        "historyId": f"{name}-{version}",
        "status": status,
        "statusDetails": {"message": "AssertionError: no" if status == "failed" else ""},
        "labels": [{"name": "claim", "value": claim}],
        "parameters": [{"name": "raychaos.ray_version", "value": f"'{version}'", "excluded": True}],
    }
    (directory / f"{name}-{version}-result.json").write_text(json.dumps(data))


class FakeRun:
    """Stands in for pytest: records the command, writes results, returns an exit code."""

    def __init__(self, code: int, regress: bool = False) -> None:
        self.code, self.regress = code, regress
        self.commands: list[tuple[list[str], Path]] = []

    def __call__(self, command: list[str], cwd: Path) -> int:
        self.commands.append((command, cwd))
        if self.code in (0, 1):
            alluredir = Path(command[command.index("--alluredir") + 1])
            write_result(alluredir, "test_retried", "2.59.0", "TASK-01", "passed")
            late = "failed" if self.regress else "passed"
            write_result(alluredir, "test_retried", "2.60.0", "TASK-01", late)
        return self.code


def test_arguments_and_pytest_arguments_after_the_separator() -> None:
    args = parse("upgrade-check", "--from", "2.59.0", "--to", "2.60.0", "--", "-k", "objects")
    assert (args.from_version, args.to_version) == ("2.59.0", "2.60.0")
    assert args.pytest_args == ["--", "-k", "objects"]
    assert args.alluredir is None and args.base_image is None


def test_an_unknown_release_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("upgrade-check", "--from", "2.59.9", "--to", "2.60.0")
    assert exited.value.code == 2
    assert "2.59.9" in capsys.readouterr().err


def test_the_same_release_twice_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert raychaos("upgrade-check", "--from", "2.60.0", "--to", "2.60.0") == 2
    err = capsys.readouterr().err
    assert err == (
        "raychaos: error: --from and --to are both 2.60.0: an upgrade needs two releases\n"
    )
    assert not (tmp_path / "reports").exists()  # nothing built, nothing created


def test_the_pytest_command_runs_both_releases_into_one_directory(tmp_path: Path) -> None:
    results = tmp_path / "r"
    command = pytest_command(
        "2.59.0", "2.60.0", results, ["--", "-k", "objects", "-n", "2"], cwd=tmp_path
    )
    assert command == [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "chaos.experiments",
        "--raychaos-ray-version",
        "2.59.0",
        "--raychaos-ray-version",
        "2.60.0",
        "--alluredir",
        str(results),
        "-k",
        "objects",
        "-n",
        "2",
    ]
    (tmp_path / "experiments").mkdir()
    command = pytest_command("2.59.0", "2.60.0", results, [], cwd=tmp_path, base_image="py:3.11")
    assert command[3:4] == ["experiments/"]
    assert command[command.index("--raychaos-base-image") + 1] == "py:3.11"
    with pytest.raises(ChaosError, match="sets --alluredir, --raychaos-ray-version itself"):
        pytest_command(
            "2.59.0",
            "2.60.0",
            results,
            ["--alluredir=x", "--raychaos-ray-version", "2.1.0"],
            cwd=tmp_path,
        )


def test_upgrade_check_builds_runs_compares_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[tuple[str, str, str | None]] = []
    run = FakeRun(1)
    stale = tmp_path / default_alluredir("2.59.0", "2.60.0")
    stale.mkdir(parents=True)
    (stale / "old-result.json").write_text("{}")
    code = upgrade_check(
        "2.59.0",
        "2.60.0",
        ["--", "-x"],
        cwd=tmp_path,
        build=lambda a, b, image: built.append((a, b, image)),
        run=run,
    )
    assert code == 0  # pytest's 1 is a failed test, not a regression between the releases
    assert built == [("2.59.0", "2.60.0", None)]
    ((command, cwd),) = run.commands
    assert cwd == tmp_path.resolve() and command[-1] == "-x"
    results = tmp_path.resolve() / "reports" / "allure-upgrade-2.59.0-to-2.60.0"
    assert command[command.index("--alluredir") + 1] == str(results)
    assert not (results / "old-result.json").exists()  # our default directory starts empty
    page = results.parent / "upgrade-2.59.0-to-2.60.0.html"
    assert "Ray 2.59.0 → Ray 2.60.0" in page.read_text()
    out, err = capsys.readouterr()
    assert out.startswith("# raychaos compare: Ray 2.59.0 → Ray 2.60.0")
    assert f"raychaos: HTML {page}" in err
    assert f"raychaos: Allure results {results}" in err


def test_upgrade_check_exits_1_on_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = upgrade_check(
        "2.59.0",
        "2.60.0",
        alluredir=tmp_path / "mine",
        cwd=tmp_path,
        build=lambda *a: None,
        run=FakeRun(1, regress=True),
    )
    assert code == 1
    assert "| TASK-01 | passed | failed | **regression** |" in capsys.readouterr().out
    assert (tmp_path / "upgrade-2.59.0-to-2.60.0.html").is_file()


@pytest.mark.parametrize("pytest_code", [2, 4, 5])
def test_when_pytest_did_not_run_its_exit_code_is_returned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pytest_code: int
) -> None:
    code = upgrade_check(
        "2.59.0", "2.60.0", cwd=tmp_path, build=lambda *a: None, run=FakeRun(pytest_code)
    )
    assert code == pytest_code
    assert f"pytest exited {pytest_code} without running the suite" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.html"))


def test_a_users_results_directory_must_be_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "x-result.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(upgrade, "build_images", lambda *a: pytest.fail("built"))
    argv = ("upgrade-check", "--from", "2.59.0", "--to", "2.60.0", "--alluredir", str(theirs))
    assert raychaos(*argv) == 2
    assert "is not empty: earlier results would be compared too" in capsys.readouterr().err
    assert (theirs / "x-result.json").exists()


def test_the_cli_path_uses_the_module_builder_and_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    built: list[str] = []
    monkeypatch.setattr(upgrade, "build_images", lambda a, b, image: built.extend([a, b]))
    monkeypatch.setattr(upgrade, "run_pytest", FakeRun(0))
    assert raychaos("upgrade-check", "--from", "2.59.0", "--to", "2.60.0") == 0
    assert built == ["2.59.0", "2.60.0"]
    assert (tmp_path / "reports" / "upgrade-2.59.0-to-2.60.0.html").is_file()
    assert "no regression" in capsys.readouterr().out
