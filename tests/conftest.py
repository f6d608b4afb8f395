"""The harness's own tests: unit (no Docker), plugin (pytester), integration (real Docker)."""

pytest_plugins = ["pytester"]
