"""`raychaos upgrade-check --from-image A --to-image B`: each side probed, one pytest session
per side into its own directory, the two compared (no Docker, no pytest run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_compare_upgrade import parse, raychaos, write_result

from chaos.cli import upgrade
from chaos.cli.upgrade import UpgradeSide, upgrade_check_sides
from chaos.errors import ChaosError

MINE = UpgradeSide(image="mycorp/ray:2.59")
NEXT = UpgradeSide(image="mycorp/ray:2.60")


class SideRun:
    """Stands in for pytest on one side: writes that side's result, returns an exit code."""

    def __init__(self, codes: dict[str, int], verdicts: dict[str, str]) -> None:
        self.codes, self.verdicts = codes, verdicts
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], cwd: Path) -> int:
        self.commands.append(command)
        image = command[command.index("--raychaos-image") + 1]
        alluredir = Path(command[command.index("--alluredir") + 1])
        release = {"mycorp/ray:2.59": "2.59.0", "mycorp/ray:2.60": "2.60.0"}[image]
        write_result(alluredir, "test_retried", release, "TASK-01", self.verdicts[image])
        return self.codes.get(image, 0)


def prepared(side: UpgradeSide, base_image: str | None) -> str:
    return {"mycorp/ray:2.59": "2.59.0", "mycorp/ray:2.60": "2.60.0"}[str(side.image)]


def test_image_sides_parse_and_mix_with_releases() -> None:
    args = parse("upgrade-check", "--from-image", "mycorp/ray:2.59", "--to", "2.60.0")
    assert (args.from_image, args.from_version, args.to_version) == (
        "mycorp/ray:2.59",
        None,
        "2.60.0",
    )
    with pytest.raises(SystemExit):
        parse("upgrade-check", "--from", "2.59.0", "--from-image", "x:1", "--to", "2.60.0")


def test_each_image_runs_in_its_own_session_and_the_two_are_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = SideRun({}, {"mycorp/ray:2.59": "passed", "mycorp/ray:2.60": "failed"})
    code = upgrade_check_sides(
        MINE, NEXT, ["--", "-k", "tasks"], cwd=tmp_path, prepare=prepared, run=run
    )
    assert code == 1  # a regression
    results = tmp_path.resolve() / "reports" / "allure-upgrade-mycorp_ray_2.59-to-mycorp_ray_2.60"
    base, candidate = run.commands
    assert base[base.index("--alluredir") + 1] == str(results / "base")
    assert candidate[candidate.index("--alluredir") + 1] == str(results / "candidate")
    assert base[-2:] == ["-k", "tasks"] and "--raychaos-ray-version" not in base
    out = capsys.readouterr().out
    assert "| TASK-01 | passed | failed | **regression** |" in out
    assert (results.parent / "upgrade-mycorp_ray_2.59-to-mycorp_ray_2.60.html").is_file()


def test_a_side_whose_session_did_not_run_ends_the_check_with_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = SideRun({"mycorp/ray:2.59": 4}, {"mycorp/ray:2.59": "passed"})
    assert upgrade_check_sides(MINE, NEXT, cwd=tmp_path, prepare=prepared, run=run) == 4
    assert "pytest exited 4 on image mycorp/ray:2.59 without running the suite" in (
        capsys.readouterr().err
    )
    assert len(run.commands) == 1 and not list(tmp_path.rglob("*.html"))


def test_the_same_image_twice_and_owned_options_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"both image mycorp/ray:2\.59"):
        upgrade_check_sides(MINE, MINE, cwd=tmp_path, prepare=prepared, run=SideRun({}, {}))
    with pytest.raises(ChaosError, match="upgrade-check sets --raychaos-image itself"):
        upgrade_check_sides(
            MINE,
            NEXT,
            ["--raychaos-image=x:1"],
            cwd=tmp_path,
            prepare=prepared,
            run=SideRun({}, {}),
        )


def test_the_cli_probes_each_image_before_any_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    order: list[str] = []

    def probe(side: UpgradeSide, base_image: str | None) -> str:
        order.append(f"probe {side}")
        return prepared(side, base_image)

    monkeypatch.setattr(upgrade, "prepare_side", probe)
    run = SideRun({}, {"mycorp/ray:2.59": "passed", "mycorp/ray:2.60": "passed"})

    def runner(command: list[str], cwd: Path) -> int:
        order.append("pytest")
        return run(command, cwd)

    monkeypatch.setattr(upgrade, "run_pytest", runner)
    argv = ("upgrade-check", "--from-image", "mycorp/ray:2.59", "--to-image", "mycorp/ray:2.60")
    assert raychaos(*argv) == 0
    assert order == [
        "probe image mycorp/ray:2.59",
        "probe image mycorp/ray:2.60",
        "pytest",
        "pytest",
    ]
