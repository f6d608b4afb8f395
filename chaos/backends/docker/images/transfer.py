"""Carrying images between Docker engines: ``docker save`` on one streamed into ``docker load``.

A run may use several engines (:mod:`chaos.backends.docker.engines`). An engine that lacks an
image gets it from another of the run that has it, current, through this host — no file, no
registry — and only when none has it is it built. The base image travels along, so the recipe
hash (which includes the base image's id) is the same on both ends, and is checked on arrival.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chaos import labels
from chaos.backends.docker.images.base import present_base
from chaos.backends.docker.images.settings import Progress, stderr_progress
from chaos.errors import ChaosError, ImageBuildError

if TYPE_CHECKING:
    import docker

    from chaos.backends.docker.images.steps import ImageSteps

#: Carrying an image from one engine to another (``docker save`` streamed into ``docker
#: load`` through this host): the Ray image and its base are ~1.5 GB, 30 min is ~1 MB/s.
TRANSFER_TIMEOUT_S = 1800.0
#: Connecting to an engine for a transfer (it answered a moment ago).
CONNECT_TIMEOUT_S = 30.0
#: Bytes per read of a transfer, and how often (bytes) it reports progress.
TRANSFER_CHUNK = 1 << 20
TRANSFER_REPORT_EVERY = 256 << 20


def carry_from_donors(builder: ImageSteps, tag: str, ray_version: str, python: str) -> bool:
    """Load ``tag`` (Ray ``ray_version`` on ``python``) and its base into ``builder``'s engine
    from another engine of the run that has both, current, unless this engine has it current
    already; True when carried.

    The base comes along so that it has the same id here, hence the same recipe hash; the
    loaded image's ``raychaos.recipe`` label is checked against the hash computed here. A
    donor that does not answer, or a transfer that fails, means a build instead.
    """
    here = present_base(builder, python)
    if here is not None and builder.current(tag, builder.recipe_hash(ray_version, python, here)):
        return False
    for donor in builder.donors() if builder.donors is not None else ():
        try:
            base = present_base(donor, python)
            if base is None:
                continue
            recipe = donor.recipe_hash(ray_version, python, base)
            if not donor.current(tag, recipe):
                continue
        except ChaosError as exc:
            builder.progress(f"{donor.engine or 'an engine'} cannot give {tag}: {exc.message}")
            continue
        where = f" from {donor.engine} to {builder.engine}" if builder.engine else ""
        builder.progress(f"carrying {tag} and {base}{where} (docker save | docker load)")
        try:
            size, took = carry(donor.client, builder.client, [base, tag], builder.progress)
        except ChaosError as exc:
            builder.progress(f"carrying {tag} failed ({exc.message}); building it instead")
            return False
        loaded = builder.recipe_label(tag)
        expected = builder.recipe_hash(ray_version, python, base)
        if loaded != recipe or expected != recipe:
            builder.progress(
                f"carried {tag} has recipe {loaded}, expected {expected}: building it here"
            )
            return False
        builder.progress(
            f"carried {tag}{where}: {size / 2**30:.2f} GiB in {took:.0f} s, "
            f"{labels.IMAGE_RECIPE}={recipe} checked"
        )
        return True
    return False


def carry(
    source: docker.DockerClient,
    target: docker.DockerClient,
    refs: Sequence[str],
    progress: Progress = stderr_progress,
    bound_s: float = TRANSFER_TIMEOUT_S,
) -> tuple[int, float]:
    """``docker save refs`` on ``source`` streamed into ``docker load`` on ``target`` through
    this host (no file, no registry); returns (bytes carried, seconds).

    One archive for all ``refs``: layers they share travel once. Image ids are content
    addresses, so every loaded image has the id (and the labels) it had on ``source``. Bounded
    by ``bound_s`` overall; a failure is one :class:`ImageBuildError` naming both ends.
    """
    import docker.errors
    import requests

    started = time.monotonic()
    deadline = started + bound_s
    sent = 0
    what = f"carrying {', '.join(refs)}"

    def chunks(response: Any) -> Iterator[bytes]:
        nonlocal sent
        reported = 0
        for chunk in response.iter_content(TRANSFER_CHUNK, False):
            sent += len(chunk)
            if sent - reported >= TRANSFER_REPORT_EVERY:
                reported = sent
                progress(f"{what}: {sent / 2**30:.2f} GiB in {time.monotonic() - started:.0f} s")
            if time.monotonic() > deadline:
                raise ImageBuildError(
                    f"{what} did not finish within {bound_s:.0f} s (TRANSFER_TIMEOUT_S) after "
                    f"{sent / 2**20:.0f} MiB",
                    hint="check the link between this host and both engines, or build the image "
                    "on the slow engine (`DOCKER_HOST=… raychaos image build`)",
                )
            yield chunk

    # docker-py's request helpers take a per-call timeout; its public methods do not.
    save_api: Any = source.api
    load_api: Any = target.api
    try:
        # docker-py's get_image() names one image; the API's /images/get takes several.
        # The engine exports every layer before the first byte: the read timeout is the bound.
        saved = save_api._get(
            save_api._url("/images/get"),
            params={"names": list(refs)},
            stream=True,
            timeout=(CONNECT_TIMEOUT_S, bound_s),
        )
        save_api._raise_for_status(saved)
        try:
            loaded = load_api._post(
                load_api._url("/images/load"),
                data=chunks(saved),
                params={"quiet": "1"},
                stream=True,
                timeout=(CONNECT_TIMEOUT_S, bound_s),
            )
            load_api._raise_for_status(loaded)
            for line in load_api._stream_helper(loaded, decode=True):
                if isinstance(line, dict) and line.get("error"):
                    raise ImageBuildError(f"{what}: docker load said {line['error']}")
        finally:
            saved.close()
    except docker.errors.APIError as exc:
        raise ImageBuildError(
            f"{what} failed: {exc.explanation or exc}",
            hint="check free disk on the receiving engine (`docker system df`)",
        ) from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise ImageBuildError(
            f"{what} failed after {sent / 2**20:.0f} MiB: {str(exc).splitlines()[0][:300]}",
            hint="check that both engines still answer (`docker -H URL info`)",
        ) from exc
    return sent, time.monotonic() - started
