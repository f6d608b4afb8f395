"""The plugin as users meet it, through pytester (pytest-xdist's acceptance-test shape)."""

from __future__ import annotations

import socket
import time

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


def test_help_lists_one_option_group_without_a_daemon(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "raychaos: Ray chaos experiments in Docker:",
            "*--raychaos-ray-version*",
            "*--raychaos-keep*",
            "*raychaos_ray_version*",
        ]
    )


def test_report_header_shows_effective_settings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(raychaos_settings): pass")
    result = pytester.runpytest_subprocess(
        "--raychaos-ray-version=2.59.0", "-p", "no:cacheprovider"
    )
    result.stdout.fnmatch_lines(
        ["raychaos: run *, Ray 2.59.0 (--raychaos-ray-version), image raychaos/ray:2.59.0-py3.11*"]
    )
    result.assert_outcomes(passed=1)


def test_a_run_without_raychaos_tests_hears_nothing_from_it(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Inert unless used: no header line, no Docker call, no sweep. The engine here accepts
    connections and never answers (the unresponsive engine that cost a plain test 31 s)."""
    sock_path = tmp_path_factory.mktemp("engine") / "docker.sock"
    engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    engine.bind(str(sock_path))
    engine.listen(16)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock_path}")
    pytester.makepyfile("def test_ok(): pass")
    try:
        started = time.monotonic()
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
        took = time.monotonic() - started
    finally:
        engine.close()
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if line.startswith("raychaos:")], result.outlines
    assert took < 15, f"a plain test took {took:.1f} s: something waited for the engine"


def test_bad_option_is_a_usage_error_naming_its_source(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYCHAOS_BOOT_TIMEOUT", "forever")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--raychaos-boot-timeout (from env RAYCHAOS_BOOT_TIMEOUT)*"])


def test_cluster_marker_builds_the_spec(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cluster(workers=3, gcs_ft="redis", env={"RAY_health_check_period_ms": "1000"})
        def test_spec(cluster_spec, raychaos_settings):
            assert cluster_spec.node_names() == ["head", "worker-1", "worker-2", "worker-3", "driver"]
            assert cluster_spec.gcs_ft == "redis"
            assert cluster_spec.ray_version == raychaos_settings.ray_version == "2.59.0"
            assert cluster_spec.env["RAY_health_check_period_ms"] == "1000"

        @pytest.mark.cluster("fast-health-checks", driver=False)
        def test_topology(cluster_spec):
            assert cluster_spec.node_names() == ["head", "worker-1", "worker-2"]
            assert cluster_spec.env["RAY_health_check_failure_threshold"] == "3"
        """
    )
    result = pytester.runpytest_subprocess("--raychaos-ray-version=2.59.0")
    result.assert_outcomes(passed=2)


def test_bad_marker_is_a_usage_error_naming_the_field(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cluster(workers=[{"name": "worker", "num_cpus": -2}])
        def test_spec(cluster_spec):
            pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.cluster: workers[[]0[]].num_cpus: expected a whole num_cpus ≥ 0, got -2*"]
    )


def test_xdist_workers_share_the_run_id_and_differ_in_worker_id(pytester: pytest.Pytester) -> None:
    out = pytester.path / "identities"
    out.mkdir()
    pytester.makepyfile(
        f"""
        import pathlib
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_identity(raychaos_identity, i):
            out = pathlib.Path({str(out)!r})
            (out / f"{{raychaos_identity.worker}}-{{i}}").write_text(raychaos_identity.run_id)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    files = list(out.iterdir())
    run_ids = {f.read_text() for f in files}
    workers = {f.name.split("-")[0] for f in files}
    assert len(files) == 4
    assert len(run_ids) == 1
    assert workers == {"gw0", "gw1"}
