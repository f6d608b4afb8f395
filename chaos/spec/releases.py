"""Which Ray releases a run can use: shipped, on the configured package index, or a wheel file.

:func:`chaos.spec.validation.ray_version` (the one validation every caller uses) asks, in order:

1. The releases shipped with raychaos (``fixtures/ray-releases.txt``): accepted with no query,
   so a run of a listed release never waits on the network before its image build.
2. A wheel given with ``--raychaos-ray-wheel`` (:func:`read_wheel`, then :func:`provide`): its
   version is this process's to use, and ``ImageBuilder.ensure`` builds the image from it
   (``BuildSettings.wheels`` defaults to :func:`provided`). Settings are resolved in every
   pytest process (xdist workers too), so every process that validates a spec knows the wheel.
   Likewise the release a ready-made image holds (:func:`held_by_image`).
3. The package index pip is configured with (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
   PIP_FIND_LINKS, PIP_NO_INDEX, pip.conf — pip itself is asked, so all of it applies):
   ``pip index versions ray --pre`` restricted to the wheels the images install (cp311
   manylinux), cached for :data:`INDEX_TTL_S` under a key of that configuration. An index that
   does not answer means the shipped list, said once.
"""

from __future__ import annotations

import contextlib
import email.parser
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from chaos import console
from chaos.errors import SpecError
from chaos.resources import default_cache_dir, fixtures_path

Progress = Callable[[str], None]

#: A release as raychaos accepts it: X.Y.Z, then PEP 440's pre-release, post-release,
#: development and local parts in their normalised spelling (2.61.0rc1, 2.61.0.dev0,
#: 2.60.0.post1, 2.60.0+mycorp.1).
VERSION_RE = re.compile(
    r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?$"
)
#: The images' wheel platforms per engine architecture (``pip download --platform``).
PLATFORMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "x86_64": ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"),
        "aarch64": ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"),
    }
)
#: The Python of the images' Ray venv (``images.DEBIAN_PYTHON``): the index is asked for it.
IMAGE_PYTHON = "3.11"

#: How long an index's answer is reused. Short: a release published since is seen within
#: minutes, and a version absent from a cached answer is asked again anyway.
INDEX_TTL_S = 600.0
#: The whole ``pip index versions`` call (a listing: one page per index and find-links).
INDEX_QUERY_TIMEOUT_S = 60.0
#: pip's own per-connection bounds for that call, under the one above, so a dead index is
#: reported by pip with its reason rather than killed (they override pip.conf's for this call).
PIP_NETWORK_OPTIONS = ("--timeout", "15", "--retries", "1")


def release_key(version: str) -> Version:
    """PEP 440 order: 2.61.0.dev0 < 2.61.0rc1 < 2.61.0 < 2.61.0+mycorp.1 < 2.61.0.post1."""
    return Version(version)


def same_release(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


@cache
def shipped() -> tuple[str, ...]:
    """Ray releases with cp311 wheels listed in ``fixtures/ray-releases.txt``, oldest first."""
    text = fixtures_path("ray-releases.txt").read_text(encoding="utf-8")
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(sorted((line for line in lines if line), key=release_key))


def nearest(version: str, releases: Sequence[str], count: int = 2) -> tuple[str, ...]:
    """Up to ``count`` releases on either side of where ``version`` would sort."""
    ordered = sorted(releases, key=release_key)
    at = sum(1 for v in ordered if release_key(v) < release_key(version))
    return tuple(ordered[max(0, at - count) : at + count])


def sort_releases(versions: Iterable[str]) -> list[str]:
    """``versions`` in :func:`release_key` order. A label that is no release (a report's
    ``unversioned``) sorts first, by name, so a report never fails on one odd result."""

    def key(version: str) -> tuple[int, Version, str]:
        try:
            return (1, release_key(version), "")
        except InvalidVersion:
            return (0, Version("0"), version)

    return sorted(versions, key=key)


# -- wheels given by the user --------------------------------------------------------------
@dataclass(frozen=True)
class RayWheel:
    """A Ray wheel file of the user's (a patched build, a nightly) that the images install."""

    path: Path
    #: From the wheel's METADATA (the file name agrees), normalised.
    version: str
    sha256: str
    #: Engine architectures it installs on (keys of :data:`PLATFORMS`).
    arches: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.sha256[:12]


def read_wheel(path: Path, where: str, python: str = IMAGE_PYTHON) -> RayWheel:
    """The Ray wheel at ``path``, checked to install in the images (cp311 manylinux); one
    :class:`SpecError` naming ``where`` otherwise."""
    abi = "cp" + python.replace(".", "")
    example = f"ray-2.61.0rc1-{abi}-{abi}-manylinux2014_x86_64.whl"
    if not path.is_file():
        raise SpecError(
            where, f"a Ray wheel file such as {example}", str(path), hint="no such file"
        )
    try:
        name, file_version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        raise SpecError(where, f"a wheel file named like {example}", path.name) from None
    if name != "ray":
        raise SpecError(where, "a wheel of ray", path.name, hint=f"that is a wheel of {name}")
    arches = tuple(
        arch
        for arch, platforms in PLATFORMS.items()
        if any(
            t.interpreter == abi and t.abi in (abi, "abi3") and t.platform in platforms
            for t in tags
        )
    )
    if not arches:
        raise SpecError(
            where,
            f"a wheel for the images' Python and platforms ({abi}, manylinux x86_64 or aarch64)",
            path.name,
            hint="its tags: " + ", ".join(sorted(str(t) for t in tags)),
        )
    version = _metadata_version(path, where)
    if Version(version) != file_version:
        raise SpecError(
            where,
            f"a wheel whose METADATA version matches its file name ({file_version})",
            version,
            hint="was the file renamed? give the wheel its own name back",
        )
    if not VERSION_RE.match(version):
        raise SpecError(where, "a Ray version X.Y.Z[rcN][.postN][.devN][+local]", version)
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return RayWheel(path.resolve(), version, digest.hexdigest(), arches)


def _metadata_version(path: Path, where: str) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = [
                n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)
            ]
            if len(metadata) != 1:
                raise SpecError(where, "a wheel with one .dist-info/METADATA", path.name)
            text = archive.read(metadata[0]).decode("utf-8", "replace")
    except zipfile.BadZipFile:
        raise SpecError(where, "a wheel (a zip archive)", path.name) from None
    headers = email.parser.Parser().parsestr(text, headersonly=True)
    if (headers.get("Name") or "").lower() != "ray":
        raise SpecError(
            where, "a wheel of ray", path.name, hint=f"METADATA names {headers['Name']}"
        )
    try:
        return str(Version(headers.get("Version") or ""))
    except InvalidVersion:
        raise SpecError(where, "a wheel with a PEP 440 version", headers.get("Version")) from None


#: Versions this process runs from a wheel: validation accepts them, images build from them.
_PROVIDED: dict[str, RayWheel] = {}


def provide(wheel: RayWheel) -> None:
    """Make ``wheel.version`` usable in this process, built from ``wheel``."""
    _PROVIDED[wheel.version] = wheel


def provided() -> Mapping[str, RayWheel]:
    """Version → wheel for every wheel this process was given (a copy)."""
    return MappingProxyType(dict(_PROVIDED))


def wheel_of(version: str) -> RayWheel | None:
    return next((w for v, w in _PROVIDED.items() if same_release(v, version)), None)


#: Versions a ready-made image of this run holds (``--raychaos-image``): nothing to install.
_HELD: set[str] = set()


def held_by_image(version: str) -> None:
    """Accept ``version`` in this process without asking the index: an image holds it."""
    _HELD.add(version)


def local(version: str) -> bool:
    """``version`` comes from this run's own wheel or image, not from the index."""
    return wheel_of(version) is not None or any(same_release(v, version) for v in _HELD)


# -- the package index ---------------------------------------------------------------------
@dataclass(frozen=True)
class IndexAnswer:
    """What the configured package index has of ray (cp311 manylinux wheels)."""

    #: Oldest first; empty when it has none or could not be asked.
    versions: tuple[str, ...]
    #: Why it could not be asked ("" when it answered).
    unreachable: str = ""
    #: Read from the cache file, not asked by this process.
    cached: bool = False

    def has(self, version: str) -> bool:
        return any(same_release(v, version) for v in self.versions)


#: Answers this process has, by configuration key (asked once per process, said once).
_ANSWERS: dict[str, IndexAnswer] = {}


def index_releases(
    *,
    refresh: bool = False,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> IndexAnswer:
    """ray's versions on the package index pip is configured with: from this process's memory,
    else the cache file when younger than :data:`INDEX_TTL_S`, else asked (``refresh``: asked
    unless this process asked already). Unreachable: says so once and answers nothing."""
    env = os.environ if env is None else env
    key = configuration_key(pip, env)
    known = _ANSWERS.get(key)
    if known is not None and not (refresh and known.cached):
        return known
    path = (cache_dir or default_cache_dir()) / "releases" / f"ray-index-{key}.json"
    answer = None if refresh else _read_cache(path)
    if answer is None:
        answer = query_index(pip, env)
        if answer.unreachable:
            newest = shipped()[-1]
            (progress or _stderr)(
                f"package index not reachable ({answer.unreachable}): using the "
                f"{len(shipped())} releases shipped with raychaos (newest {newest})"
            )
        else:
            _write_cache(path, answer)
    _ANSWERS[key] = answer
    return answer


def query_index(pip: Sequence[str], env: Mapping[str, str]) -> IndexAnswer:
    """Ask ``pip index versions ray --pre`` for the images' wheels (bounded)."""
    abi = "cp" + IMAGE_PYTHON.replace(".", "")
    platforms = [arg for ps in PLATFORMS.values() for p in ps for arg in ("--platform", p)]
    with tempfile.TemporaryDirectory(prefix="raychaos-pip-") as tmp:
        log = Path(tmp) / "pip.log"
        # --log: pip's debug log, where an index it could not reach is named ("Could not fetch
        # URL …") — its exit status alone does not tell that from an index without ray.
        argv = [
            *pip,
            "--log",
            str(log),
            "index",
            "versions",
            "ray",
            "--pre",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            IMAGE_PYTHON,
            "--abi",
            abi,
            *platforms,
            *PIP_NETWORK_OPTIONS,
        ]
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                env=dict(env),
                timeout=INDEX_QUERY_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:  # run() has killed pip, which starts no children
            return IndexAnswer((), f"no answer from pip within {INDEX_QUERY_TIMEOUT_S:.0f} s")
        except OSError as exc:
            return IndexAnswer((), f"could not run {pip[0]}: {exc.strerror}")
        logged = log.read_text(errors="replace") if log.is_file() else ""
    return parse_answer(proc.returncode, proc.stdout, proc.stderr, logged)


def parse_answer(code: int, stdout: str, stderr: str, log: str) -> IndexAnswer:
    """``pip index versions``' outcome: its versions, nothing, or why the index was not asked."""
    for line in stdout.splitlines():
        if line.startswith("Available versions:"):
            found = [v.strip() for v in line.partition(":")[2].split(",") if v.strip()]
            valid = [v for v in found if _valid(v)]
            return IndexAnswer(tuple(sorted(valid, key=release_key)))
    failed = re.search(r"Could not fetch URL (\S+?): (.*?)(?: - skipping)?$", log, re.MULTILINE)
    if failed:
        return IndexAnswer((), f"{failed.group(1)}: {failed.group(2)}"[:200])
    if code != 0 and "No matching distribution found" in stderr + stdout:
        return IndexAnswer(())  # it answered: no ray wheel for the images there
    tail = (stderr or stdout).strip().splitlines()[-1:] or [f"exit status {code}"]
    return IndexAnswer((), f"pip index versions: {tail[0][:200]}")


def configuration_key(pip: Sequence[str], env: Mapping[str, str]) -> str:
    """A digest of what decides pip's answer: its PIP_* variables, its configuration files and
    the modification times of local find-links directories (a wheel dropped in is seen)."""
    parts = [" ".join(pip), IMAGE_PYTHON]
    parts += sorted(f"{k}={v}" for k, v in env.items() if k.startswith("PIP_"))
    for path in _pip_config_files(env):
        with contextlib.suppress(OSError):
            parts.append(f"{path}:{hashlib.sha256(path.read_bytes()).hexdigest()}")
    for link in env.get("PIP_FIND_LINKS", "").split():
        local = Path(link.removeprefix("file://"))
        with contextlib.suppress(OSError):
            parts.append(f"{local}@{local.stat().st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _pip_config_files(env: Mapping[str, str]) -> list[Path]:
    """pip's configuration files, global to site (``pip config debug`` lists the same)."""
    home = Path(env.get("HOME") or Path.home())
    xdg_dirs = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    xdg_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    return files


def _read_cache(path: Path) -> IndexAnswer | None:
    try:
        if time.time() - path.stat().st_mtime > INDEX_TTL_S:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        versions = tuple(str(v) for v in data["versions"] if _valid(str(v)))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, stale or unreadable: ask again
    return IndexAnswer(versions, cached=True)


def _write_cache(path: Path, answer: IndexAnswer) -> None:
    with contextlib.suppress(OSError):  # a cache that cannot be written costs a query later
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"versions": list(answer.versions)}), encoding="utf-8")
        os.replace(tmp, path)


def _valid(version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


_stderr = console.progress
