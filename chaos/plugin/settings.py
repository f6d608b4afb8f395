"""Effective raychaos settings: marker > command line > environment > ini (pytest-timeout's order).

Every value remembers where it came from, so an error can say which knob to fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import SpecError
from chaos.report.patterns import split_list
from chaos.spec.releases import RayWheel, provide, read_wheel
from chaos.spec.topology import DEFAULT_PYTHON, DEFAULT_RAY_VERSION
from chaos.spec.validation import ray_version


class SettingError(ValueError):
    """A bad option value; the plugin turns it into ``pytest.UsageError``."""


@dataclass(frozen=True)
class Option:
    """One setting: its flag, ini key, environment variable, default and parser."""

    dest: str
    flag: str
    ini: str
    env: str
    default: str
    help: str
    parse: Callable[[str], Any] = str
    is_flag: bool = False
    #: Given several times on the command line; env and ini take a list (commas or spaces).
    repeatable: bool = False


def _positive_seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"expected a number of seconds, got {raw!r}") from None
    if value <= 0:
        raise SettingError(f"expected seconds > 0, got {raw!r}")
    return value


def _ray_version(raw: str) -> str:
    try:
        ray_version(raw, "ray version")
    except SpecError as exc:
        raise SettingError(str(exc).removeprefix("ray version: ")) from None
    return raw


def _ray_wheel(raw: str) -> RayWheel | None:
    """A Ray wheel file of one's own (patched, nightly): its version becomes the run's."""
    if not raw:
        return None
    try:
        return read_wheel(Path(raw).expanduser(), "wheel", DEFAULT_PYTHON)
    except SpecError as exc:
        raise SettingError(str(exc).removeprefix("wheel: ")) from None


def _ray_versions(raw: str) -> tuple[str, ...]:
    versions = [_ray_version(v) for v in split_list(raw)]
    if not versions:
        raise SettingError("expected at least one Ray release such as 2.60.0")
    twice = sorted({v for v in versions if versions.count(v) > 1})
    if twice:
        raise SettingError(
            f"expected different Ray releases, got {', '.join(twice)} more than once"
        )
    return tuple(versions)


def _optional_version(raw: str) -> str:
    return _ray_version(raw) if raw else ""


def _claim_patterns(raw: str) -> tuple[str, ...]:
    return tuple(split_list(raw))


def _slots(raw: str) -> int:
    if raw in ("", "auto"):
        return 0  # auto: chaos.cluster.boot_slots.default_slots()
    if not raw.isdigit() or int(raw) < 1:
        raise SettingError(f"expected a whole number ≥ 1 (or auto), got {raw!r}")
    return int(raw)


def _trials(raw: str) -> int:
    raw = raw.strip()
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < 1:
        raise SettingError(f"expected a whole number of trials ≥ 1, got {raw!r}")
    return int(raw)


def _seed(raw: str) -> int | None:
    """A schedule seed (``--raychaos-seed``); empty: a fresh one per run."""
    raw = raw.strip()
    if not raw:
        return None
    if not re.fullmatch(r"[0-9]+", raw):
        raise SettingError(
            f"expected a whole number ≥ 0 (the seed a run printed and recorded), got {raw!r}"
        )
    return int(raw)


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SettingError(f"expected true or false, got {raw!r}")


#: URL schemes docker-py connects to (``docker -H``'s spellings).
_ENGINE_SCHEMES = ("unix", "tcp", "ssh", "http", "https")


def _docker_hosts(raw: str) -> tuple[str, ...]:
    """Docker engine URLs; empty means DOCKER_HOST, else the local socket
    (:func:`chaos.backends.docker.engines.engine_urls`)."""
    hosts = split_list(raw)
    for host in hosts:
        scheme, sep, rest = host.partition("://")
        if not sep or scheme not in _ENGINE_SCHEMES or not rest.strip("/"):
            raise SettingError(
                "expected a Docker engine URL such as unix:///var/run/docker.sock, "
                f"tcp://host:2376 or ssh://user@host, got {host!r}"
            )
    twice = sorted({h for h in hosts if hosts.count(h) > 1})
    if twice:
        raise SettingError(f"expected different engines, got {', '.join(twice)} more than once")
    return tuple(hosts)


def _image(raw: str) -> str:
    if raw and not re.match(r"^[\w./:@-]+$", raw):
        raise SettingError(
            f"expected an image reference such as raychaos/ray:2.60.0-py3.11, got {raw!r}"
        )
    return raw


OPTIONS: tuple[Option, ...] = (
    Option(
        "ray_versions",
        "--raychaos-ray-version",
        "raychaos_ray_version",
        "RAYCHAOS_RAY_VERSION",
        DEFAULT_RAY_VERSION,
        "Ray release the clusters run (an image is built for it on first use); repeat it to "
        "run every experiment once per release",
        _ray_versions,
        repeatable=True,
    ),
    Option(
        "ray_wheel",
        "--raychaos-ray-wheel",
        "raychaos_ray_wheel",
        "RAYCHAOS_RAY_WHEEL",
        "",
        "a Ray wheel file of your own (a patched build, a nightly; cp311 manylinux): the "
        "images are built from it and its version is the run's release (added to "
        "--raychaos-ray-version's when those are given)",
        _ray_wheel,
    ),
    Option(
        "skew_from",
        "--raychaos-skew-from",
        "raychaos_skew_from",
        "RAYCHAOS_SKEW_FROM",
        "",
        "the other Ray release of version-skew experiments (default: another release of the "
        "run, else the one before)",
        _optional_version,
    ),
    Option(
        "claims",
        "--raychaos-claims",
        "raychaos_claims",
        "RAYCHAOS_CLAIMS",
        "",
        "run only experiments verifying these claims (ids or patterns: OBJ-*,TASK-01)",
        _claim_patterns,
    ),
    Option(
        "claims_file",
        "--raychaos-claims-file",
        "raychaos_claims_file",
        "RAYCHAOS_CLAIMS_FILE",
        "",
        "a catalogue of your own claims (the form of raychaos' claims.toml, families under "
        "prefixes of your own), listed, labelled and counted beside raychaos' (a relative "
        "path is from the rootdir)",
        str.strip,
    ),
    Option(
        "image",
        "--raychaos-image",
        "raychaos_image",
        "RAYCHAOS_IMAGE",
        "",
        "use this ready-made node image instead of building one",
        _image,
    ),
    Option(
        "base_image",
        "--raychaos-base-image",
        "raychaos_base_image",
        "RAYCHAOS_BASE_IMAGE",
        "",
        "base image for builds (default: a Debian image made with debootstrap)",
        _image,
    ),
    Option(
        "patch_python",
        "--raychaos-patch-python",
        "raychaos_patch_python",
        "RAYCHAOS_PATCH_PYTHON",
        "",
        "a CPython of the image's minor release but another patch, for Python patch-skew "
        "experiments (default: the interpreter running pytest)",
    ),
    Option(
        "boot_timeout",
        "--raychaos-boot-timeout",
        "raychaos_boot_timeout",
        "RAYCHAOS_BOOT_TIMEOUT",
        "180",
        "seconds until every node must be ALIVE in the GCS",
        _positive_seconds,
    ),
    Option(
        "boot_slots",
        "--raychaos-boot-slots",
        "raychaos_boot_slots",
        "RAYCHAOS_BOOT_SLOTS",
        "auto",
        "clusters this machine boots at once, across xdist workers (auto: one per 2 cores)",
        _slots,
    ),
    Option(
        "docker_hosts",
        "--raychaos-docker-host",
        "raychaos_docker_hosts",
        "RAYCHAOS_DOCKER_HOSTS",
        "",
        "a Docker engine to run clusters on (unix://, tcp://, ssh://); repeat it to spread the "
        "experiments over several engines, one per xdist worker (default: DOCKER_HOST, else "
        "the local socket)",
        _docker_hosts,
        repeatable=True,
    ),
    Option(
        "trials",
        "--raychaos-trials",
        "raychaos_trials",
        "RAYCHAOS_TRIALS",
        "1",
        "run every experiment this many times (ids test_x[2.60.0-trial2]); the report shows "
        "passes out of N with a Wilson interval and windows as median and spread",
        _trials,
    ),
    Option(
        "seed",
        "--raychaos-seed",
        "raychaos_seed",
        "RAYCHAOS_SEED",
        "",
        "the seed of the run's fault schedules (churn experiments); a run prints and records "
        "its seed, and this replays it: same strikes, same order, same offsets (default: a "
        "fresh seed per run)",
        _seed,
    ),
    Option(
        "boot_ahead",
        "--raychaos-boot-ahead",
        "raychaos_boot_ahead",
        "RAYCHAOS_BOOT_AHEAD",
        "false",
        "boot the next test's cluster while the current test runs, through the same boot "
        "slots (true or false; pays off only where boots are not CPU-bound)",
        _bool,
    ),
    Option(
        "keep",
        "--raychaos-keep",
        "raychaos_keep",
        "RAYCHAOS_KEEP",
        "false",
        "keep the clusters of failed tests for inspection",
        _bool,
        is_flag=True,
    ),
)


@dataclass(frozen=True)
class Settings:
    #: Every experiment runs once per release, in this order.
    ray_versions: tuple[str, ...] = (DEFAULT_RAY_VERSION,)
    #: A wheel of the user's: its version is one of ``ray_versions``, built from it.
    ray_wheel: RayWheel | None = None
    skew_from: str = ""
    claims: tuple[str, ...] = ()
    #: A team's catalogue file as given ("" = raychaos' claims only).
    claims_file: str = ""
    image: str = ""
    base_image: str = ""
    patch_python: str = ""
    boot_timeout: float = 180.0
    boot_slots: int = 0
    #: Every experiment runs this many times (trials of one test share its Allure history).
    trials: int = 1
    #: The fault schedules' seed; None: the run draws one (:mod:`chaos.plugin.seed`).
    seed: int | None = None
    #: Boot the next test's cluster while the current one runs (:mod:`chaos.plugin.boot_ahead`).
    boot_ahead: bool = False
    keep: bool = False
    #: Engine URLs; empty: DOCKER_HOST, else the local socket (one engine).
    docker_hosts: tuple[str, ...] = ()
    workload_paths: tuple[Path, ...] = ()
    #: Where each value came from ("--flag", "env VAR", "ini key", "default").
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def ray_version(self) -> str:
        """The run's main release (the last given): what a single-version caller uses."""
        return self.ray_versions[-1]


def resolve(
    cli: dict[str, Any], ini: dict[str, str], env: dict[str, str] | None = None
) -> Settings:
    """Merge the sources for every option; raise :class:`SettingError` naming the source."""
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    # The wheel first: its version must be known before a release naming it is checked.
    for option in sorted(OPTIONS, key=lambda o: o.dest != "ray_wheel"):
        raw: Any
        cli_value = cli.get(option.dest)
        if cli_value not in (None, False, []):
            raw, source = cli_value, option.flag
            if isinstance(raw, list):
                raw = ",".join(raw)
        elif env.get(option.env):
            raw, source = env[option.env], f"env {option.env}"
        elif ini.get(option.ini) not in (None, ""):
            raw, source = ini[option.ini], f"ini {option.ini}"
        else:
            raw, source = option.default, "default"
        try:
            values[option.dest] = raw if isinstance(raw, bool) else option.parse(str(raw))
        except SettingError as exc:
            raise SettingError(f"{option.flag} (from {source}): {exc}") from None
        sources[option.dest] = source
        if isinstance(values[option.dest], RayWheel):
            provide(values[option.dest])  # this process validates and builds its version
    if (wheel := values.get("ray_wheel")) is not None:
        values["ray_versions"] = _with_wheel(values["ray_versions"], sources, wheel)
    return Settings(**values, sources=sources)


def _with_wheel(
    versions: tuple[str, ...], sources: dict[str, str], wheel: RayWheel
) -> tuple[str, ...]:
    """The run's releases with the wheel's: instead of the default release, else after those
    given (one of them may name it)."""
    if sources["ray_versions"] == "default":
        sources["ray_versions"] = sources["ray_wheel"]
        return (wheel.version,)
    if wheel.version in versions:
        return versions
    return (*versions, wheel.version)
