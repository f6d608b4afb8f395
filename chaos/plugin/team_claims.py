"""A team's own claims (``--raychaos-claims-file``): its catalogue merged into ours for the
session, and each of its claims verified by some collected test.

pytest hooks, registered by :mod:`chaos.plugin`. Inert without the option: the file is the
team's, read (never written) at configure; the plugin copies its text into the results
directory at session finish (:mod:`chaos.plugin.allure`), so ``raychaos coverage``, ``compare``
and ``report`` know the run's claims.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.errors import ChaosError
from chaos.plugin.keys import SETTINGS_KEY
from chaos.plugin.results.item_labels import claims_of
from chaos.plugin.settings import Settings


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """After the options are resolved (:mod:`chaos.plugin.options`)."""
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is not None:
        _use_team_claims(config, settings)


def _use_team_claims(config: pytest.Config, settings: Settings) -> None:
    """A team's catalogue (``--raychaos-claims-file``) merged into ours for the whole session,
    or one usage line on a file that cannot be read, is malformed or reuses a family of ours."""
    if not settings.claims_file:
        return
    from chaos.report.catalogue import use_team_file

    path = Path(settings.claims_file).expanduser()
    path = path if path.is_absolute() else config.rootpath / path
    try:
        use_team_file(path)
    except ChaosError as exc:
        source = settings.sources.get("claims_file", "--raychaos-claims-file")
        raise pytest.UsageError(
            f"raychaos: --raychaos-claims-file (from {source}): {exc}"
        ) from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With a team catalogue, each of its claims is verified by some collected test — checked
    before ``-k`` or ``--raychaos-claims`` deselect, and only when the run collected whole
    directories (a run of one file or one test verifies what it names)."""
    from chaos.report.catalogue import load_catalogue, team_file

    path = team_file()
    if path is None or hasattr(config, "workerinput") or not _whole_directories(config):
        return
    from chaos.report.catalogue import parse_catalogue

    team = parse_catalogue(path.read_text(encoding="utf-8"), str(path))
    claimed = {claim for item in items for claim in claims_of(item)}
    orphans = [c.id for c in load_catalogue() if c.family in team.families and c.id not in claimed]
    if orphans:
        where = ", ".join(str(a) for a in config.args) or str(config.rootpath)
        raise pytest.UsageError(
            f"raychaos: team claim(s) {', '.join(orphans)} ({path}) have no experiment: no test "
            f"collected from {where} carries @pytest.mark.claim with their id — write one, or "
            "drop the claim from the file"
        )


def _whole_directories(config: pytest.Config) -> bool:
    args = [a for a in config.args if not a.startswith("-")] or [str(config.rootpath)]
    here = config.invocation_params.dir
    return all("::" not in a and (here / Path(a)).is_dir() for a in args)
