"""Java ``.properties`` (Allure's ``environment.properties``): write, read, merge."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape_key(key: str) -> str:
    return "".join("\\" + c if c in "\\=: #!" else c for c in key)


def format_properties(props: Mapping[str, str]) -> str:
    """One ``key=value`` line each; values on one line (whitespace runs become one space)."""
    lines = []
    for key, value in props.items():
        flat = " ".join(str(value).split()).replace("\\", "\\\\")
        lines.append(f"{_escape_key(key)}={flat}")
    return "\n".join(lines) + "\n"


def _logical_lines(text: str) -> Iterator[tuple[str, str]]:
    """(raw text, joined content) of each logical line: a line ending in an odd number of
    backslashes continues on the next, whose leading whitespace is dropped (Java's rule)."""
    raw: list[str] = []
    joined = ""
    for line in text.splitlines():
        raw.append(line)
        part = line.lstrip() if len(raw) > 1 else line
        trailing = len(part) - len(part.rstrip("\\"))
        comment = len(raw) == 1 and part.lstrip()[:1] in ("#", "!")
        if trailing % 2 and not comment:
            joined += part[:-1]
            continue
        yield "\n".join(raw), joined + part
        raw, joined = [], ""
    if raw:
        yield "\n".join(raw), joined


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(enumerate(text))
    for i, ch in chars:
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            continue
        _, nxt = next(chars)
        if nxt == "u" and i + 6 <= len(text):
            digits = text[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                out.append(nxt)
                continue
            for _ in range(4):
                next(chars)
        else:
            out.append(_ESCAPES.get(nxt, nxt))
    return "".join(out)


def _split(line: str) -> tuple[str, str] | None:
    """(key, value) of a logical line; None for a blank line or a comment."""
    stripped = line.lstrip()
    if not stripped or stripped[0] in "#!":
        return None
    end, escaped = len(stripped), False
    for i, ch in enumerate(stripped):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in "=: \t\f":
            end = i
            break
    rest = stripped[end:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(stripped[:end]), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: separators ``=``, ``:`` or whitespace, escapes, continuations,
    ``#``/``!`` comments; a key given twice keeps its last value."""
    found: dict[str, str] = {}
    for _, line in _logical_lines(text):
        pair = _split(line)
        if pair is not None:
            found[pair[0]] = pair[1]
    return found


def merge_properties(existing: str, ours: Mapping[str, str]) -> str:
    """``existing`` with ``ours`` added: its other lines (comments included) kept verbatim.

    A key of ours replaces the same key in ``existing``: it is a value of an earlier raychaos
    run into the same directory (or a clash, which would leave Allure's reader one of two).
    """
    kept = []
    for raw, line in _logical_lines(existing):
        pair = _split(line)
        if pair is None or pair[0] not in ours:
            kept.append(raw)
    head = "\n".join(kept).rstrip("\n")
    return (head + "\n" if head else "") + format_properties(ours)
