"""Argument types shared by the commands: a bad value is argparse's usage error (exit 2)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from chaos.errors import SpecError


def release(where: str) -> Callable[[str], str]:
    """A Ray release, checked as everywhere else (:func:`chaos.spec.validation.ray_version`)."""

    def parse(raw: str) -> str:
        from chaos.spec.validation import ray_version

        try:
            ray_version(raw, where)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return raw

    return parse


def python(raw: str) -> str:
    if not re.fullmatch(r"3\.\d+(?:\.\d+)?", raw):
        raise argparse.ArgumentTypeError(f"expected a Python version such as 3.11, got {raw!r}")
    return raw


def seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {raw!r}")
    return value


def age(raw: str) -> float:
    from chaos.backends.docker.sweep import parse_age

    try:
        return parse_age(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
