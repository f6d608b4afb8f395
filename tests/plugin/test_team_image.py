"""A team's own image (--raychaos-image) at collection: its Ray release parametrises the tests,
a fault tool it lacks skips exactly the experiments that declare it, and a release given
alongside that differs is one usage line. The probe itself is real Docker work
(tests/integration/test_team_images.py); here it is replaced by its result."""

from __future__ import annotations

import pytest

from chaos.plugin import backend
from chaos.spec.image_contract import FAULT_TOOLS, REQUIRED_TOOLS, ImageProbe

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SUITE = """
import pytest


@pytest.mark.needs_tools("iptables", "ss")
def test_partition(raychaos_ray_version):
    pass


@pytest.mark.needs_tools("ps", "kill")
def test_kill_raylet(raychaos_ray_version):
    pass


def test_tasks(raychaos_ray_version):
    assert raychaos_ray_version == "2.61.0"


def test_plain():
    pass
"""


def probe(image: str, *, lacking: tuple[str, ...] = ()) -> ImageProbe:
    tools = {t: f"/usr/bin/{t}" for t in (*REQUIRED_TOOLS, *FAULT_TOOLS) if t not in lacking}
    return ImageProbe(
        image=image,
        node_image="raychaos/node:0123456789ab",
        ray="/usr/local/bin/ray",
        python="/usr/bin/python3",
        ray_version="2.61.0",
        python_version="3.11.2",
        prefix_kind="prefix",
        tools=tools,
    )


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """derive() answers with a probe lacking iptables; records the images it was asked for."""
    asked: list[str] = []

    def fake_derive(builder: object, image: str, labels: object) -> ImageProbe:
        asked.append(image)
        return probe(image, lacking=("iptables",))

    # The plugin reaches the backend through its one seam: the fakes go there.
    monkeypatch.setattr(backend, "derive", fake_derive)
    monkeypatch.setattr(backend, "connect", lambda **_: object())
    for var in ("RAYCHAOS_IMAGE", "RAYCHAOS_RAY_VERSION"):
        monkeypatch.delenv(var, raising=False)
    return asked


def test_the_images_release_runs_and_a_missing_tool_skips_what_needs_it(
    pytester: pytest.Pytester, probed: list[str]
) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess(
        "--raychaos-image", "mycorp/ray:next", "-rs", "-v", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*raychaos: image mycorp/ray:next: Ray 2.61.0 on Python 3.11.2 (prefix /usr/bin/python3)*",
            "*raychaos: image lacks iptables (network partitions*): skips 1: test_partition?2.61.0?",
            "*SKIPPED*image mycorp/ray:next has no iptables, which this experiment needs*",
        ]
    )
    result.stdout.fnmatch_lines(["*::test_kill_raylet?2.61.0? PASSED*"])  # it has ps and kill
    assert set(probed) == {"mycorp/ray:next"}


def test_a_release_given_with_an_image_of_another_is_one_usage_line(
    pytester: pytest.Pytester, probed: list[str]
) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_inprocess(
        "--raychaos-image", "mycorp/ray:next", "--raychaos-ray-version", "2.60.0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--raychaos-image mycorp/ray:next holds Ray 2.61.0, but the run asks for 2.60.0*"]
    )


def test_an_unknown_tool_in_the_marker_is_a_usage_error(
    pytester: pytest.Pytester, probed: list[str]
) -> None:
    pytester.makepyfile(
        """
import pytest

@pytest.mark.needs_tools("nmap")
def test_scan(raychaos_ray_version):
    pass
"""
    )
    result = pytester.runpytest_inprocess("--raychaos-image", "mycorp/ray:next")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs_tools: expected tools among ps, kill*got nmap*"])


def test_without_an_image_nothing_is_probed(pytester: pytest.Pytester, probed: list[str]) -> None:
    pytester.makepyfile(SUITE.replace('"2.61.0"', '"2.60.0"'))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "tasks or plain")
    result.assert_outcomes(passed=2, deselected=2)
    assert probed == []


def test_an_image_without_serve_skips_the_serve_family_with_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = "ModuleNotFoundError: No module named 'starlette'"

    def fake_derive(builder: object, image: str, labels: object) -> ImageProbe:
        found = probe(image)
        return ImageProbe(**{**found.__dict__, "modules": {"ray.serve": error}})

    # The plugin reaches the backend through its one seam: the fakes go there.
    monkeypatch.setattr(backend, "derive", fake_derive)
    monkeypatch.setattr(backend, "connect", lambda **_: object())
    for var in ("RAYCHAOS_IMAGE", "RAYCHAOS_RAY_VERSION"):
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(
        """
import pytest

pytestmark = pytest.mark.needs_modules("ray.serve")


def test_serve_replica(raychaos_ray_version):
    pass


def test_serve_proxy(raychaos_ray_version):
    pass
"""
    )
    result = pytester.runpytest_inprocess(
        "--raychaos-image", "mycorp/ray:next", "-rs", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            f"*raychaos: image cannot import ray.serve ({error}; Ray Serve*): skips 2: "
            "test_serve_replica?2.61.0?, test_serve_proxy?2.61.0?",
            f"*SKIPPED*image mycorp/ray:next cannot import ray.serve: ray.serve: {error}*",
        ]
    )
