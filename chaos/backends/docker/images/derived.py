"""A team's own Ray image made into a node image: FROM theirs, plus the node entry and wrappers.

A platform team upgrades from *their* image to *their* next one, so the harness must boot any
image that has Ray, wherever Ray lives in it (a venv, the system prefix, a conda prefix) and
whatever its default user. The derived image adds only what the harness itself needs
(``fixtures/derived/``): the node entry, ``/raychaos`` directories, and ``ray``/``python``
wrappers pointing at the image's own Ray and Python, written by a probe that runs once in a
``RUN`` step (no network). The probe's findings — Ray and Python versions, where they are, which
fault tools exist — are kept in the derived image (``/raychaos/probe.json``) and read back
without starting anything (``docker create`` + archive). The derived image is cached by the
base image's id and the recipe: an unchanged team image is never derived twice.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from chaos import labels
from chaos.backends.docker.client import call
from chaos.backends.docker.images.settings import digest, file_digests
from chaos.errors import ImageBuildError
from chaos.resources import fixtures_path
from chaos.spec.image_contract import ImageProbe

if TYPE_CHECKING:
    from chaos.backends.docker.images.steps import ImageSteps

REPOSITORY = "raychaos/node"
PROBE_FILE = "/raychaos/probe.json"
#: What the probe prints to stderr before it fails (fixtures/derived/probe.sh).
PROBE_SAYS = "raychaos-probe:"
CONTRACT = "the image contract: raychaos's docs/images.md"

_probes: dict[str, ImageProbe] = {}


def recipe(base_id: str) -> str:
    """The derived image's recipe: the base image's id and every file of the recipe."""
    return digest([base_id, *file_digests(_context_files())])


def derive(
    builder: ImageSteps, image: str, container_labels: Mapping[str, str]
) -> ImageProbe | None:
    """The node image derived from ``image`` (built on first use) and what its probe found;
    None for an image raychaos built itself (it is a node image already).

    Raises one :class:`ImageBuildError` when ``image`` is absent and unpullable, has no
    ``sh``, no Ray, or lacks a tool every node needs.
    """
    if not (builder.present(image) or builder.pull(image)):
        raise ImageBuildError(
            f"image {image} is not in the Docker engine and cannot be pulled",
            hint="check the name (`docker images`), build or load it, or drop --raychaos-image "
            "to let raychaos build one",
        )
    found = call(f"inspect {image}", lambda: builder.client.images.get(image))
    if (found.labels or {}).get(labels.IMAGE_KIND) == "ray":  # also an image FROM one of ours
        return None
    base_id = str(found.id)
    wanted = recipe(base_id)
    tag = f"{REPOSITORY}:{wanted}"
    if tag in _probes:
        return _probes[tag]
    with builder.locked(tag):
        if not builder.current(tag, wanted):
            builder.progress(f"deriving node image {tag} from {image} (probe + node entry)")
            _build(builder, image, tag, wanted)
    probe = ImageProbe.from_json(image, tag, _read_probe(builder, tag, container_labels))
    probe.require_bootable()
    _probes[tag] = probe
    return probe


def _context_files() -> list[Path]:
    return [
        *sorted(fixtures_path("derived").iterdir()),
        fixtures_path("image", "node-entry.sh"),
    ]


def _build(builder: ImageSteps, image: str, tag: str, wanted: str) -> None:
    context = Path(tempfile.mkdtemp(prefix="raychaos-derive-", dir=builder.settings.cache_dir))
    try:
        for item in _context_files():
            shutil.copy2(item, context / item.name)  # keeps the scripts' modes
        try:
            builder.docker_build(
                tag,
                wanted,
                path=str(context),
                buildargs={"BASE": image, "RECIPE": wanted, "DERIVED_FROM": image},
                label=False,  # the Dockerfile's one LABEL: each API label is a slow step
            )
        except ImageBuildError as exc:
            raise _explained(image, exc) from None
    finally:
        shutil.rmtree(context, ignore_errors=True)


def _explained(image: str, exc: ImageBuildError) -> ImageBuildError:
    """The probe's own words when it refused the image; else why the step could not run."""
    said = f"{exc.message} {exc.hint or ''}"
    if PROBE_SAYS in said:
        reason = said.split(PROBE_SAYS, 1)[1].split(" | ")[0].strip()
        return ImageBuildError(f"{image} cannot be a raychaos node: {reason}", hint=CONTRACT)
    if "/bin/sh" in said and ("no such file" in said.lower() or "not found" in said.lower()):
        return ImageBuildError(
            f"{image} cannot be a raychaos node: it has no /bin/sh", hint=CONTRACT
        )
    return ImageBuildError(f"deriving a node image from {image}: {exc.message}", hint=exc.hint)


def _read_probe(
    builder: ImageSteps, tag: str, container_labels: Mapping[str, str]
) -> dict[str, object]:
    """``/raychaos/probe.json`` of ``tag``, read from a created (never started) container."""
    container = call(
        f"create a container of {tag} to read its probe",
        lambda: builder.client.containers.create(
            tag, ["true"], network_mode="none", labels=dict(container_labels)
        ),
    )
    try:
        chunks, _ = call(f"read {PROBE_FILE} of {tag}", lambda: container.get_archive(PROBE_FILE))
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None else None
            if handle is None:
                raise ImageBuildError(f"{tag} has no readable {PROBE_FILE}")
            data = json.loads(handle.read().decode())
    finally:
        with contextlib.suppress(Exception):  # its labels let the sweep remove a leftover
            container.remove(force=True)
    if not isinstance(data, dict):
        raise ImageBuildError(f"{PROBE_FILE} of {tag} is not a JSON object")
    return data
