"""`jsonl`: one JSON object per line, fields picked by `columns` (JSON keys).

columns: `label` and the input fields the task's kind declares (most kinds: `text` required, `text_b`
optional); `id`, `group` optional. A field of several texts (`segments`) names one key holding a list of
strings or a list of keys, one text each; a field of words, a key holding a list of strings. A label may be a
string, a number (regression, or class names such as 0/1) or, for multilabel tasks, a list of strings.
Blank lines are skipped; any other line that is not a JSON object is an error.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from mtbio.data.example import Example, Label
from mtbio.data.readers.base import input_values, register
from mtbio.data.readers.delimited import COLUMNS
from mtbio.data.readers.text import iter_lines, origin
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line."""
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, line_no, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(record, dict):
            raise DataFormatError(path, line_no, f"expected a JSON object, got {type(record).__name__}")
        yield line_no, record


def json_label(value: Any, path: Path, line: int) -> Label:
    """A JSON label value as a raw label: str, float, list of str, or an object (for a kind whose labels have parts;
    the kind's `check_label` reads it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (str, float)):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, dict):
        return dict(value)  # type: ignore[return-value]
    raise DataFormatError(path, line, f"label must be a string, a number, a list of strings or an object, got {json.dumps(value)[:80]}")


@register("jsonl", columns=COLUMNS, column_kind="name", inputs="declared")
def read_jsonl(path: Path, task: TaskDef) -> Iterator[Example]:
    """Examples from JSON lines, e.g. MedNLI's {sentence1, sentence2, gold_label, pairID}."""
    columns = {key: name if isinstance(name, list) else str(name) for key, name in task.columns.items()}
    for line_no, record in iter_json_lines(path):
        missing = [n for name in columns.values() for n in (name if isinstance(name, list) else [name])
                   if n not in record]
        if missing:
            raise DataFormatError(path, line_no, f"missing field(s) {', '.join(missing)}")
        values = {key: [record[n] for n in name] if isinstance(name, list) else record[name]
                  for key, name in columns.items()}
        for key in ("id", "group"):
            if key in values and not isinstance(values[key], (str, int)):
                raise DataFormatError(path, line_no, f"field '{columns[key]}' must be a string")
        yield Example(
            uid=str(values["id"]) if "id" in values else f"{path.name}:{line_no}",
            label=json_label(values["label"], path, line_no),
            inputs=input_values(task, values, path, line_no),
            group=str(values["group"]) if "group" in values else None,
            origin=origin(path, line_no),
        )
