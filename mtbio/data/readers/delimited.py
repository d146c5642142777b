"""Generic `tsv` and `csv` readers driven by the task's `columns`.

`columns` maps example fields to columns: `label` and the input fields the task's kind declares
(`mtbio.tasks.shapes`; most kinds: `text` required, `text_b` making a pair task); `id` and `group`
(document id) are optional. A column is a position (0-based; negative counts from the end) or, with
`header: true`, a header name; a field of several texts (`segments`) takes a list of columns, one text
each, and a field of words one column of words separated by spaces.

reader_options:
  header: bool           first row is a header (default false); it is never read as data
  delimiter: str         field separator (default tab for tsv, comma for csv)
  quoting: bool          honour "..." quoting like Python's csv module (default false for tsv,
                         true for csv); BLUE's TSVs were written with csv quoting, BLURB's were not
  label_separator: str   multilabel tasks: separator inside the label cell (default ",")

Every row must have the same number of fields as the header (or, without a header, as the
first row). Blank lines are not rows and are skipped.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import input_fields, input_values, register
from mtbio.data.readers.text import iter_lines, origin, read_text
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

COLUMNS = {"label": True, "id": False, "group": False}  # with the input fields the task's kind declares
OPTIONS: dict[str, type | tuple[type, ...]] = {"header": bool, "delimiter": str, "quoting": bool, "label_separator": str}


def check_options(task: TaskDef) -> list[tuple[str, str]]:
    """Option values of the right type that still cannot split a row."""
    options = task.reader_options
    problems = []
    delimiter = options.get("delimiter")
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n'):
        problems.append(("reader_options.delimiter", f"must be one character other than a quote or a line break, "
                         f"got {delimiter!r}"))
    if options.get("label_separator") == "":
        problems.append(("reader_options.label_separator", "must not be empty"))
    return problems


@register("tsv", columns=COLUMNS, options=OPTIONS, check=check_options, inputs="declared")
def read_tsv(path: Path, task: TaskDef) -> Iterator[Example]:
    """Tab-separated rows (BLUE/BLURB style)."""
    return _read(path, task, delimiter="\t", quoting=False)


@register("csv", columns=COLUMNS, options=OPTIONS, check=check_options, inputs="declared")
def read_csv(path: Path, task: TaskDef) -> Iterator[Example]:
    """Comma-separated rows with csv quoting."""
    return _read(path, task, delimiter=",", quoting=True)


def _read(path: Path, task: TaskDef, delimiter: str, quoting: bool) -> Iterator[Example]:
    opts = task.reader_options
    delimiter = opts.get("delimiter", delimiter)
    rows = _rows(path, delimiter, opts.get("quoting", quoting))
    positions, width = _resolve_columns(path, task, rows, bool(opts.get("header", False)))
    separator = opts.get("label_separator", ",")
    words = [f.name for f in input_fields(task) if f.value == "words" and f.name in positions]
    for line, cells in rows:
        if len(cells) != width:
            raise DataFormatError(path, line, f"expected {width} fields separated by {delimiter!r}, found {len(cells)}")
        get: dict[str, Any] = {key: [cells[p] for p in pos] if isinstance(pos, list) else cells[pos]
                               for key, pos in positions.items()}
        for name in words:
            get[name] = get[name].split()
        label = task.kind.labels.from_cell(get["label"].strip(), separator)
        yield Example(
            uid=get["id"] if "id" in get else f"{path.name}:{line}",
            label=label,
            inputs=input_values(task, get, path, line),
            group=get.get("group"),
            origin=origin(path, line),
        )


Rows = list[tuple[int, list[str]]]


def _rows(path: Path, delimiter: str, quoting: bool) -> Rows:
    """(line number, fields) for every non-blank row, header included."""
    if not quoting:
        return [(n, line.split(delimiter)) for n, line in iter_lines(path) if line.strip()]
    text = read_text(path).lstrip("\ufeff")
    csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # a long valid field is not malformed
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows = []
    start = 1
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataFormatError(path, reader.line_num, f"malformed quoted field: {exc}") from None
    return rows


def _resolve_columns(path: Path, task: TaskDef, rows: Rows, header: bool) -> tuple[dict[str, int | list[int]], int]:
    """Column positions by key and the expected row width; pops the header row off `rows`."""
    if not rows:
        raise DataFormatError(path, None, "no rows")
    names: list[str] | None = None
    if header:
        line, names = rows.pop(0)
        names = [n.strip() for n in names]
        width = len(names)
        if not rows:
            raise DataFormatError(path, None, "a header but no rows")
    else:
        line, first = rows[0]
        width = len(first)
    def position(key: str, col: int | str) -> int:
        if isinstance(col, str):
            if names is None:
                raise DataFormatError(path, None, f"column '{key}' is given by name ('{col}') but the task has no header: true")
            if col not in names:
                raise DataFormatError(path, line, f"no column named '{col}' in the header ({', '.join(names)})")
            return names.index(col)
        if not -width <= col < width:
            raise DataFormatError(path, line, f"column '{key}' is at position {col} but rows have {width} fields")
        return col % width

    positions: dict[str, int | list[int]] = {
        key: [position(key, c) for c in col] if isinstance(col, list) else position(key, col)
        for key, col in task.columns.items()}
    return positions, width
