"""A real Ray wheel under a version no index publishes: the 2.60.0 wheel repacked.

The package's name and files are untouched; its ``.dist-info`` directory, METADATA's
``Version``, ``ray/_version.py`` (what ``ray.__version__`` says) and RECORD's entries and
hashes are rewritten. Entries keep their timestamps, so the same source gives the same bytes
(and the image built from it is reused by the next run).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from pathlib import Path

#: Newer than everything shipped and everything read; a local version, so no public index
#: will ever publish it and its image can never be taken for a release's.
VERSION = "2.60.1+raychaos.test"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def repack(source: Path, version: str, dest: Path) -> Path:
    """``source`` (a ``ray-X-…whl``) as ``version``, written into ``dest`` (reused if there)."""
    old = source.name.split("-")[1]
    target = dest / source.name.replace(f"ray-{old}-", f"ray-{version}-", 1)
    if target.exists():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    old_info, new_info = f"ray-{old}.dist-info/", f"ray-{version}.dist-info/"
    partial = target.with_suffix(f".{os.getpid()}.part")
    records: list[str] = []
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(partial, "w") as zout:
        for info in zin.infolist():
            name = info.filename
            if name == f"{old_info}RECORD":
                continue
            data = zin.read(info)
            renamed = new_info + name[len(old_info) :] if name.startswith(old_info) else name
            if renamed == f"{new_info}METADATA":
                data = re.sub(rb"(?m)^Version: .*$", f"Version: {version}".encode(), data, count=1)
            elif name == "ray/_version.py":
                data = re.sub(rb'(?m)^version = ".*"$', f'version = "{version}"'.encode(), data)
            copy = zipfile.ZipInfo(renamed, date_time=info.date_time)
            copy.external_attr = info.external_attr
            copy.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(copy, data, compresslevel=1)
            records.append(f"{renamed},{_record_hash(data)},{len(data)}")
        records.append(f"{new_info}RECORD,,")
        record = zipfile.ZipInfo(f"{new_info}RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        record.compress_type = zipfile.ZIP_DEFLATED
        zout.writestr(record, "\n".join(records) + "\n")
    partial.replace(target)
    return target


def local_index(wheelhouse: Path, dest: Path, version: str = VERSION) -> Path:
    """A find-links directory: the wheelhouse's wheels (Ray 2.60.0 and its dependencies, hard
    linked) plus its Ray wheel repacked as ``version``."""
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in wheelhouse.glob("*.whl"):
        link = dest / wheel.name
        if not link.exists():
            try:
                os.link(wheel, link)
            except OSError:
                link.symlink_to(wheel)
    [ray] = wheelhouse.glob("ray-*.whl")
    repack(ray, version, dest)
    return dest
