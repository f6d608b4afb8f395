"""The second Python patch release for VER-02: probing interpreters and the build context."""

from __future__ import annotations

import platform
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from chaos.bench import python_patch
from chaos.errors import PythonPatchUnavailable


def test_probe_reports_the_running_interpreter() -> None:
    found = python_patch.probe(python_patch.host_interpreter())
    assert found.version == platform.python_version()
    assert found.minor == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert Path(found.prefix) == Path(sys.base_prefix)


def test_probe_of_a_missing_interpreter_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(PythonPatchUnavailable) as info:
        python_patch.probe(str(tmp_path / "python3.11"))
    assert "--raychaos-patch-python" in str(info.value)


def test_probe_of_a_non_python_says_what_it_ran(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho nope >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(PythonPatchUnavailable) as info:
        python_patch.probe(str(fake))
    assert "exited 3" in str(info.value) and "nope" in str(info.value)


def test_context_holds_the_stdlib_without_site_packages() -> None:
    found = python_patch.probe(python_patch.host_interpreter())
    with tempfile.TemporaryFile() as out:
        python_patch._context_tar(out, b"FROM scratch\n", found)
        out.seek(0)
        with tarfile.open(fileobj=out) as tar:
            names = tar.getnames()
    stdlib = f"python/lib/python{found.minor}"
    assert "Dockerfile" in names
    assert f"{stdlib}/os.py" in names
    assert not [n for n in names if "/site-packages/" in n or "/__pycache__/" in n]
    executable = Path(found.executable)
    assert f"python/{executable.relative_to(found.prefix)}" in names
