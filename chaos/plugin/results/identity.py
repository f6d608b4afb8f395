"""What allure-pytest writes for a test that is known before the test runs, reimplemented.

A crash result (:mod:`chaos.plugin.results.crash`) must carry the ``fullName``, ``historyId`` and
``testCaseId`` allure-pytest gives the same test, or Allure shows the crash as a second test
next to the test's history. allure-pytest computes them in ``allure_pytest.utils`` and
``allure_pytest.listener``, which are not its public API; this module mirrors them (2.13 to
2.16) from public pytest data alone. ``tests/plugin/test_report_identity.py`` runs real tests
through allure-pytest and compares every field, parametrised and class tests included, so an
allure-pytest release that changes them fails that test instead of splitting histories.
"""

from __future__ import annotations

import enum
import hashlib
import platform
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

# allure-pytest's decorators (allure.feature, allure.link, allure.description…) become these
# markers; their names and kwargs are what ``allure.label``/``allure.link`` put on a test.
LABEL_MARK = "allure_label"
LINK_MARK = "allure_link"
DESCRIPTION_MARK = "allure_description"
DESCRIPTION_HTML_MARK = "allure_description_html"
#: Labels of which a test has one: the closest marker wins.
UNIQUE_LABELS = ("severity", "framework", "host", "suite", "parentSuite", "subSuite")
#: Markers that are not turned into ``tag`` labels (or that have arguments).
NOT_TAGS = frozenset({"usefixtures", "filterwarnings", "skip", "skipif", "xfail", "parametrize"})


def md5(*parts: object) -> str:
    """allure-commons' md5: the UTF-8 of each part (``repr`` unless a str or bytes), chained."""
    digest = hashlib.md5()  # noqa: S324 - an identifier, as allure computes it, not security
    for part in parts:
        if isinstance(part, bytes):
            digest.update(part)
        else:
            digest.update((part if isinstance(part, str) else repr(part)).encode("utf-8"))
    return digest.hexdigest()


def represent(value: object) -> str:
    """How allure-commons shows a parameter value: quoted str, the type of bytes, else repr."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bytes | bytearray):
        return repr(type(value))
    return repr(value)


def platform_label() -> str:
    """The ``language`` label: ``cpython3``."""
    return f"{platform.python_implementation().lower()}{platform.python_version_tuple()[0]}"


@dataclass(frozen=True)
class NodeId:
    """A pytest node id as allure-pytest splits it: path, classes, function."""

    path_segments: tuple[str, ...]
    parent_package: str
    module: str
    package: str
    class_names: tuple[str, ...]
    function: str

    @classmethod
    def parse(cls, nodeid: str) -> NodeId:
        parts = nodeid.split("::")
        filepath, *classes, function = parts if len(parts) >= 2 else [*parts, ""]
        segments = filepath.split("/")
        parent = ".".join(segments[:-1])
        module = segments[-1].rsplit(".", 1)[0]
        return cls(
            path_segments=tuple(segments),
            parent_package=parent,
            module=module,
            package=".".join(p for p in (parent, module) if p),
            class_names=tuple(classes),
            function=function.split("[", 1)[0],
        )


def full_name(item: pytest.Item) -> str:
    """``package.Class#function`` (no parameters)."""
    node = NodeId.parse(item.nodeid)
    classes = "." + ".".join(node.class_names) if node.class_names else ""
    test = item.originalname if isinstance(item, pytest.Function) else node.function
    return f"{node.package}{classes}#{test}"


def params_of(item: pytest.Item) -> dict[str, object]:
    """The test's parametrisation (direct and of its fixtures), by argument name."""
    callspec = getattr(item, "callspec", None)
    return dict(getattr(callspec, "params", None) or {})


def history_id(name: str, params: Mapping[str, object]) -> str:
    """Allure's historyId: the full name and the parameter values, by parameter name.

    Excluded parameters (raychaos' ray_version) are not part of it; pass only the others.
    """
    return md5(name, *(params[k] for k in sorted(params)))


def case_id(name: str) -> str:
    """Allure's testCaseId: the full name alone (every parametrisation shares it)."""
    return md5(name)


def title_path(item: pytest.Item) -> list[str]:
    node = NodeId.parse(item.nodeid)
    return [p for p in (*node.path_segments, *node.class_names) if p]


def _text(value: object) -> str:
    """A marker argument as allure-commons' JSON writer shows it (an enum by its value)."""
    return str(value.value if isinstance(value, enum.Enum) else value)


def marker_labels(item: pytest.Item) -> list[tuple[str, str]]:
    """Labels from allure decorators (``@allure.feature``…), each once, unique ones closest."""
    unique: dict[str, str] = {}
    labels: list[tuple[str, str]] = []
    for mark in item.iter_markers(name=LABEL_MARK):
        kind = _text(mark.kwargs["label_type"])
        if kind in UNIQUE_LABELS:
            unique.setdefault(kind, _text(mark.args[0]))
        else:
            labels += [(kind, _text(a)) for a in mark.args]
    return list(dict.fromkeys([*labels, *unique.items()]))


def tags(item: pytest.Item) -> list[str]:
    """Argument-less markers allure-pytest turns into ``tag`` labels."""
    return [
        m.name
        for m in item.iter_markers()
        if m.name not in NOT_TAGS and not m.args and not m.kwargs
    ]


def suite_labels(item: pytest.Item) -> list[tuple[str, str]]:
    """parentSuite/suite/subSuite from the node id, unless an allure decorator sets them."""
    node = NodeId.parse(item.nodeid)
    defaults = {
        "parentSuite": node.parent_package,
        "suite": node.module,
        "subSuite": " > ".join(node.class_names),
    }
    explicit = {kind for kind, _ in marker_labels(item)}
    return [(k, v) for k, v in defaults.items() if k not in explicit and v]


def marker_links(item: pytest.Item) -> list[tuple[str, str, str]]:
    """(type, url, name) of ``@allure.link``/``issue``/``testcase`` decorators."""
    return [
        (_text(m.kwargs["link_type"]), _text(m.args[0]), _text(m.kwargs["name"]))
        for m in item.iter_markers(name=LINK_MARK)
    ]


def _marker_value(item: pytest.Item, name: str) -> str | None:
    mark = item.get_closest_marker(name)
    return _text(mark.args[0]) if mark is not None and mark.args else None


def description(item: pytest.Item) -> str | None:
    """``@allure.description``, else the test function's docstring."""
    found = _marker_value(item, DESCRIPTION_MARK)
    if found:
        return found
    function = getattr(item, "function", None)
    return getattr(function, "__doc__", None) if function is not None else None


def description_html(item: pytest.Item) -> str | None:
    return _marker_value(item, DESCRIPTION_HTML_MARK)
