"""Releases raychaos does not list: PEP 440 versions, the package index (asked through a fake
pip, cached, offline), wheel files of one's own, and what the expectations say beyond what
was read. No network: every pip here is a script."""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

import pytest

from chaos.check.expectations import beyond_read, expectation
from chaos.check.versions import at_least, skew_partner
from chaos.errors import SpecError
from chaos.spec import releases, validation

ORDERED = ["2.60.0", "2.61.0.dev0", "2.61.0rc1", "2.61.0", "2.61.0+mycorp.1", "2.61.0.post1"]


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test: its own cache directory, no answers or wheels from another test."""
    monkeypatch.setattr(releases, "_ANSWERS", {})
    monkeypatch.setattr(releases, "_PROVIDED", {})
    monkeypatch.setattr(releases, "_HELD", set())
    monkeypatch.setenv("RAYCHAOS_CACHE_DIR", str(tmp_path / "cache"))


def fake_pip(tmp_path: Path, body: str) -> tuple[str, ...]:
    """A pip that counts its calls in ``calls`` and runs ``body`` (Python; ``argv`` is pip's)."""
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import sys, pathlib\n"
        f"calls = pathlib.Path({str(tmp_path / 'calls')!r})\n"
        "calls.write_text(str(int(calls.read_text() or 0) + 1) if calls.exists() else '1')\n"
        "argv = sys.argv[1:]\n" + body
    )
    return (sys.executable, str(script))


def calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return int(path.read_text()) if path.exists() else 0


def answering(*versions: str) -> str:
    return f"print('ray ({versions[0]})')\nprint('Available versions: {', '.join(versions)}')\n"


OFFLINE = (
    "log = argv[argv.index('--log') + 1]\n"
    "open(log, 'w').write('2026 Could not fetch URL https://index.example/simple/ray/: "
    "connection error: Failed to resolve - skipping\\n')\n"
    "print('ERROR: No matching distribution found for ray', file=sys.stderr)\n"
    "sys.exit(1)\n"
)


def use_pip(monkeypatch: pytest.MonkeyPatch, pip: tuple[str, ...]) -> None:
    """What validation.ray_version asks goes to ``pip``."""
    real = releases.index_releases

    def through(**kwargs: object) -> releases.IndexAnswer:
        return real(pip=pip, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(releases, "index_releases", through)


# -- versions ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "version", ["2.60.0", "2.61.0rc1", "2.61.0.dev0", "2.60.0.post1", "2.60.0+mycorp.1", "3.0.0a1"]
)
def test_pep440_releases_are_versions(version: str) -> None:
    assert releases.VERSION_RE.match(version)


@pytest.mark.parametrize("version", ["2.60", "latest", "2.60.0-rc1", "v2.60.0", "2.60.0+"])
def test_other_strings_are_not(version: str) -> None:
    with pytest.raises(SpecError) as info:
        validation.ray_version(version, "ray_version")
    assert "2.60.0" in str(info.value) and "\n" not in str(info.value)


def test_release_order_is_pep440s() -> None:
    assert sorted(reversed(ORDERED), key=releases.release_key) == ORDERED
    assert at_least("2.61.0rc1", "2.60.0") and not at_least("2.61.0rc1", "2.61.0")
    assert releases.release_key("2.10.0") > releases.release_key("2.9.3")


def test_a_skew_partner_exists_for_a_release_not_shipped() -> None:
    assert skew_partner("2.61.0rc1", ["2.61.0rc1"]) == "2.60.0"
    assert skew_partner("2.60.0+mycorp.1", ["2.60.0+mycorp.1"]) == "2.60.0"
    assert skew_partner("2.0.0", ["2.0.0"]) == releases.shipped()[0]


def test_the_shipped_list_ignores_its_comments() -> None:
    shipped = releases.shipped()
    assert shipped[-1] == "2.60.0" and all(releases.VERSION_RE.match(v) for v in shipped)


# -- the index --------------------------------------------------------------------------
def test_pips_listing_is_parsed_oldest_first() -> None:
    out = "ray (2.61.0rc1)\nAvailable versions: 2.61.0rc1, 2.60.0, 2.10.0, 2.9.3, bogus\n"
    answer = releases.parse_answer(0, out, "", "")
    assert answer.versions == ("2.9.3", "2.10.0", "2.60.0", "2.61.0rc1")
    assert answer.unreachable == "" and answer.has("2.61.0rc1")


def test_an_index_that_was_not_reached_is_told_from_one_without_ray() -> None:
    log = "x Could not fetch URL https://i.example/simple/ray/: connection error: boom - skipping"
    failed = releases.parse_answer(1, "", "ERROR: No matching distribution found for ray", log)
    assert failed.unreachable == "https://i.example/simple/ray/: connection error: boom"
    empty = releases.parse_answer(1, "", "ERROR: No matching distribution found for ray", "")
    assert (empty.versions, empty.unreachable) == ((), "")
    broken = releases.parse_answer(2, "", "ERROR: unknown command 'index'", "")
    assert "unknown command" in broken.unreachable


def test_the_query_is_pips_own_restricted_to_the_images_wheels(tmp_path: Path) -> None:
    pip = fake_pip(
        tmp_path,
        f"open({str(tmp_path / 'argv')!r}, 'w').write(' '.join(argv))\n" + answering("2.61.0"),
    )
    releases.index_releases(pip=pip, env={"PIP_INDEX_URL": "http://i.example/simple"})
    argv = (tmp_path / "argv").read_text().split()
    assert argv[argv.index("--log") + 2 :][:4] == ["index", "versions", "ray", "--pre"]
    for option in ("--only-binary=:all:", "manylinux2014_x86_64", "manylinux_2_28_aarch64"):
        assert option in argv
    assert argv[argv.index("--python-version") + 1] == "3.11"
    assert argv[argv.index("--abi") + 1] == "cp311"
    assert not {"-i", "--index-url", "--no-index", "--find-links", "--isolated"} & set(argv)


def test_an_answer_is_cached_per_pip_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = fake_pip(tmp_path, answering("2.61.0", "2.60.0"))
    links = tmp_path / "links"
    links.mkdir()
    env = {"PIP_FIND_LINKS": str(links)}
    assert releases.index_releases(pip=pip, env=env).versions == ("2.60.0", "2.61.0")
    assert releases.index_releases(pip=pip, env=env).cached is False, "this process asked"
    monkeypatch.setattr(releases, "_ANSWERS", {})  # another process
    again = releases.index_releases(pip=pip, env=env)
    assert (again.cached, calls(tmp_path)) == (True, 1)
    # Another configuration is asked on its own: never served another's list.
    releases.index_releases(pip=pip, env={"PIP_FIND_LINKS": str(links), "PIP_NO_INDEX": "1"})
    assert calls(tmp_path) == 2
    # A wheel dropped into a find-links directory changes the key too.
    monkeypatch.setattr(releases, "_ANSWERS", {})
    time.sleep(0.01)
    (links / "ray-2.62.0-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    releases.index_releases(pip=pip, env=env)
    assert calls(tmp_path) == 3


def test_a_stale_cache_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = fake_pip(tmp_path, answering("2.61.0"))
    releases.index_releases(pip=pip, env={})
    [cached] = (tmp_path / "cache" / "releases").glob("ray-index-*.json")
    assert json.loads(cached.read_text()) == {"versions": ["2.61.0"]}
    old = time.time() - releases.INDEX_TTL_S - 1
    os.utime(cached, (old, old))
    monkeypatch.setattr(releases, "_ANSWERS", {})
    assert releases.index_releases(pip=pip, env={}).cached is False
    assert calls(tmp_path) == 2


def test_offline_falls_back_and_says_so_once(tmp_path: Path) -> None:
    said: list[str] = []
    pip = fake_pip(tmp_path, OFFLINE)
    for _ in range(3):
        answer = releases.index_releases(pip=pip, env={}, progress=said.append)
    assert answer.versions == () and "connection error" in answer.unreachable
    assert said == [
        "package index not reachable (https://index.example/simple/ray/: connection error: "
        "Failed to resolve): using the 72 releases shipped with raychaos (newest 2.60.0)"
    ]
    assert calls(tmp_path) == 1
    assert not (tmp_path / "cache" / "releases").exists(), "an outage is not cached"


def test_a_hung_pip_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(releases, "INDEX_QUERY_TIMEOUT_S", 0.5)
    pip = fake_pip(tmp_path, "import time\ntime.sleep(30)\n")
    started = time.monotonic()
    answer = releases.index_releases(pip=pip, env={}, progress=lambda _: None)
    assert time.monotonic() - started < 10
    assert answer.unreachable.startswith("no answer from pip within")


# -- validation -------------------------------------------------------------------------
def test_a_shipped_release_asks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, "sys.exit(3)\n"))
    assert validation.ray_version("2.59.0", "ray_version") == "2.59.0"
    assert calls(tmp_path) == 0


def test_a_release_on_the_index_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, answering("2.61.0", "2.61.0rc1", "2.60.0")))
    assert validation.ray_version("2.61.0", "ray_version") == "2.61.0"
    assert validation.ray_version("2.61.0rc1", "ray_version") == "2.61.0rc1"
    assert calls(tmp_path) == 1


def test_a_cached_answer_without_the_release_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day a release is published, an answer from an hour ago does not refuse it."""
    listed = tmp_path / "listed"
    listed.write_text("2.60.0")
    use_pip(
        monkeypatch,
        fake_pip(
            tmp_path,
            f"print('Available versions: ' + open({str(listed)!r}).read())\n",
        ),
    )
    with pytest.raises(SpecError):
        validation.ray_version("2.61.0", "ray_version")
    listed.write_text("2.61.0, 2.60.0")
    monkeypatch.setattr(releases, "_ANSWERS", {})  # a later run: the cache says 2.60.0 only
    assert validation.ray_version("2.61.0", "ray_version") == "2.61.0"
    assert calls(tmp_path) == 2


def test_a_release_absent_from_the_index_is_one_line_naming_its_nearest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, answering("2.62.0", "2.61.0", "2.61.0rc1", "2.60.0")))
    with pytest.raises(SpecError) as info:
        validation.ray_version("2.61.5", "ray_version")
    assert str(info.value) == (
        "ray_version: expected a Ray release with cp311 manylinux wheels on the configured "
        "package index, got '2.61.5' — nearest on the package index: 2.61.0rc1, 2.61.0, 2.62.0 "
        "(newest 2.62.0); a build of your own: --raychaos-ray-wheel PATH"
    )


def test_offline_a_release_not_shipped_is_refused_naming_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, OFFLINE))
    monkeypatch.setattr(releases, "_stderr", lambda _: None)
    with pytest.raises(SpecError) as info:
        validation.ray_version("2.61.0", "ray_version")
    text = str(info.value)
    assert "package index not reachable (https://index.example/simple/ray/" in text
    assert "shipped with raychaos: 2.59.0, 2.60.0 (newest 2.60.0)" in text
    assert "\n" not in text


# -- wheels -----------------------------------------------------------------------------
def make_wheel(
    directory: Path,
    version: str = "2.61.0+mycorp.1",
    tag: str = "cp311-cp311-manylinux2014_x86_64",
    *,
    name: str = "ray",
    metadata_version: str | None = None,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(
            f"{name}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {metadata_version or version}\n",
        )
    return path


def test_a_wheel_gives_its_version_and_hash(tmp_path: Path) -> None:
    path = make_wheel(tmp_path)
    wheel = releases.read_wheel(path, "--raychaos-ray-wheel")
    assert (wheel.version, wheel.arches, len(wheel.sha256)) == ("2.61.0+mycorp.1", ("x86_64",), 64)
    assert wheel.short == wheel.sha256[:12] and wheel.path == path.resolve()
    arm = releases.read_wheel(
        make_wheel(tmp_path, "3.0.0.dev0", "cp311-cp311-manylinux_2_28_aarch64"), "w"
    )
    assert (arm.version, arm.arches) == ("3.0.0.dev0", ("aarch64",))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"tag": "cp312-cp312-manylinux2014_x86_64"}, "cp311, manylinux x86_64 or aarch64"),
        ({"tag": "cp311-cp311-macosx_11_0_arm64"}, "its tags: cp311-cp311-macosx_11_0_arm64"),
        ({"name": "numpy"}, "a wheel of numpy"),
        ({"metadata_version": "2.60.0"}, "matches its file name (2.61.0+mycorp.1)"),
    ],
)
def test_a_wheel_the_images_cannot_install_is_one_line(
    tmp_path: Path, kwargs: dict[str, str], fragment: str
) -> None:
    path = make_wheel(tmp_path, **kwargs)
    with pytest.raises(SpecError) as info:
        releases.read_wheel(path, "--raychaos-ray-wheel")
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("--raychaos-ray-wheel: expected ")


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("ray-2.61.0-cp311-cp311-manylinux2014_x86_64.whl", b"not a zip", "a zip archive"),
        ("ray.tar.gz", b"", "a wheel file named like"),
        ("missing.whl", None, "no such file"),
    ],
)
def test_a_file_that_is_no_wheel_is_one_line(
    tmp_path: Path, name: str, content: bytes | None, fragment: str
) -> None:
    if content is not None:
        (tmp_path / name).write_bytes(content)
    with pytest.raises(SpecError) as info:
        releases.read_wheel(tmp_path / name, "wheel")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_provided_wheel_is_valid_without_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, "sys.exit(3)\n"))
    releases.provide(releases.read_wheel(make_wheel(tmp_path), "w"))
    assert validation.ray_version("2.61.0+mycorp.1", "ray_version") == "2.61.0+mycorp.1"
    assert calls(tmp_path) == 0
    assert set(releases.provided()) == {"2.61.0+mycorp.1"}


def test_a_release_a_ready_made_image_holds_is_valid_without_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_pip(monkeypatch, fake_pip(tmp_path, "sys.exit(3)\n"))
    releases.held_by_image("2.60.0+mycorp.1")
    assert validation.ray_version("2.60.0+mycorp.1", "ray_version") == "2.60.0+mycorp.1"
    assert calls(tmp_path) == 0


# -- beyond what was read ---------------------------------------------------------------
def test_a_release_newer_than_every_read_one_uses_the_newest_scope_and_says_so() -> None:
    assert expectation("rocksdb_gcs").holds("2.61.0rc1")
    assert beyond_read("2.61.0rc1") == (
        "Ray 2.61.0rc1 is newer than every release the version expectations were read "
        "against (newest read: 2.60.0): the newest scope is used"
    )
    assert beyond_read("2.60.0") is None
    assert beyond_read("2.60.0+mycorp.1") is None, "a patched 2.60.0 is 2.60.0"
    assert beyond_read("not a version") is None
