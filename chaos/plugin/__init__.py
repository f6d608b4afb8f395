"""The raychaos pytest plugin (entry point ``pytest11``: ``raychaos = "chaos.plugin"``).

This module only names the plugin's modules; pytest registers each one listed in
``pytest_plugins`` when it loads this entry point, as it does for a conftest's. Each module is
one concern: options and settings, the fixtures, the per-test hook wrappers (one per phase,
their pieces in a stated order: :mod:`chaos.plugin.hooks`), claim selection, a team's own
claims, trials, a team's image, several engines, and the Allure output.
"""

#: Each module after those it imports: pytest marks a listed module for assertion rewriting
#: before importing it, and warns when another listed module imported it first.
pytest_plugins = [
    "chaos.plugin.engines",
    "chaos.plugin.trials",
    "chaos.plugin.images",
    "chaos.plugin.selection",
    "chaos.plugin.options",
    "chaos.plugin.team_claims",
    "chaos.plugin.seed",
    "chaos.plugin.fixtures",
    "chaos.plugin.hooks",
    "chaos.plugin.allure",
]
