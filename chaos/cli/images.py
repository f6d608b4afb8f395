"""``raychaos image build``: the node images, built offline before a run needs them."""

from __future__ import annotations

import argparse
from pathlib import Path

from chaos.cli.args import python, release
from chaos.cli.output import out
from chaos.spec.topology import DEFAULT_RAY_VERSION


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    image = sub.add_parser("image", help="Ray node images").add_subparsers(
        dest="image_command", required=True
    )
    build = image.add_parser("build", help="build raychaos/ray:<ray>-py<python> offline")
    build.add_argument(
        "--ray-version",
        type=release("--ray-version"),
        action="append",
        help=f"Ray release (repeatable; default {DEFAULT_RAY_VERSION})",
    )
    build.add_argument(
        "--ray-wheel",
        type=Path,
        metavar="PATH",
        help="also build the image of a Ray wheel of your own (tagged <version>-wheel-<sha>)",
    )
    build.add_argument(
        "--python", type=python, default="3.11", help="Python of the image (default 3.11)"
    )
    build.add_argument(
        "--base-image",
        default=None,
        help="base image with Python (default: Debian made with debootstrap)",
    )


def build(args: argparse.Namespace) -> int:
    from chaos.backends.docker.client import connect
    from chaos.backends.docker.images import BuildSettings, ImageBuilder

    versions = args.ray_version or ([] if args.ray_wheel else [DEFAULT_RAY_VERSION])
    if args.ray_wheel:
        from chaos.spec.releases import provide, read_wheel

        wheel = read_wheel(args.ray_wheel, "--ray-wheel", args.python)
        provide(wheel)
        versions = [*versions, wheel.version]
    client = connect()
    builder = ImageBuilder(client, BuildSettings(base_image=args.base_image))
    for version in versions:
        out(builder.ensure(version, args.python))
    return 0
