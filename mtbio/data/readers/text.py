"""Decoding and line iteration shared by the readers; every error names the file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from mtbio.errors import DataFormatError


def read_text(path: Path) -> str:
    """The file decoded as strict UTF-8 (a leading byte-order mark is kept; see `iter_lines`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataFormatError(
            path, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column}); re-encode the file as UTF-8"
        ) from None


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line ending); a leading BOM is dropped.

    Lines are split on '\\n' only (not on the other characters `str.splitlines` treats as line
    breaks, which do occur inside biomedical text), and a trailing '\\r' is removed.
    """
    text = read_text(path)
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line[:-1] if line.endswith("\r") else line


def origin(path: Path, line: int | None) -> str:
    """The `Example.origin` string: "path:line"."""
    return f"{path}:{line}" if line is not None else str(path)


def load_json(path: Path, text: str | None = None) -> Any:
    """Parse a whole JSON file (or its already-read `text`); syntax errors name the line."""
    text = read_text(path) if text is None else text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


class KeyLines:
    """Finds the line where each top-level key of a JSON object file appears, scanning forward once."""

    def __init__(self, text: str):
        self._text = text
        self._pos = 0
        self._line = 1

    def line_of(self, key: str) -> int | None:
        found = self._text.find(json.dumps(key, ensure_ascii=False), self._pos)
        if found < 0:
            return None
        self._line += self._text.count("\n", self._pos, found)
        self._pos = found
        return self._line


def require_fields(record: Any, fields: tuple[str, ...], path: Path, line: int | None, what: str,
                   strings: tuple[str, ...] = ()) -> None:
    """Raise DataFormatError unless `record` is a JSON object with all `fields` (`strings` among them: str)."""
    if not isinstance(record, dict):
        raise DataFormatError(path, line, f"{what}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise DataFormatError(path, line, f"{what}: missing field(s) {', '.join(missing)}")
    wrong = [f for f in strings if not isinstance(record[f], str)]
    if wrong:
        raise DataFormatError(path, line, f"{what}: field(s) {', '.join(wrong)} must be strings")
