"""The reader registry and what each reader declares about `columns` and `reader_options`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mtbio.data.example import Example
from mtbio.registry import Registry
from mtbio.tasks.schema import TaskDef

ReadFn = Callable[[Path, TaskDef], Iterator[Example]]


@dataclass(frozen=True)
class Reader:
    """A registered reader: the read function plus the columns and options it understands.

    `columns` maps each column key the reader accepts to whether it is required; `column_kind`
    says what a column value is ("index" = position, "name" = header/JSON key, "either").
    `options` maps each `reader_options` key to its Python type(s); `check`, where given, returns
    (field, message) for a definition whose fields have the right types but that the reader still
    cannot use (an option value, a column the chosen options need).
    `pairs`: every example the reader yields carries a second text (`text_b`), whatever the task's
    `columns` say.
    """

    name: str
    read: ReadFn
    columns: dict[str, bool] = field(default_factory=dict)
    column_kind: str = "either"
    options: dict[str, type | tuple[type, ...]] = field(default_factory=dict)
    pairs: bool = False
    check: Callable[[TaskDef], list[tuple[str, str]]] | None = None

    def __call__(self, path: Path, task: TaskDef) -> Iterator[Example]:
        return self.read(path, task)


READERS: Registry[Reader] = Registry("format")


def register(
    name: str,
    *,
    columns: dict[str, bool] | None = None,
    column_kind: str = "either",
    options: dict[str, type | tuple[type, ...]] | None = None,
    pairs: bool = False,
    check: Callable[[TaskDef], list[tuple[str, str]]] | None = None,
) -> Callable[[ReadFn], ReadFn]:
    """Register a read function under `name` (the task definition's `format`)."""

    def decorator(fn: ReadFn) -> ReadFn:
        READERS.register(name)(Reader(name, fn, dict(columns or {}), column_kind, dict(options or {}), pairs,
                                      check))
        return fn

    return decorator


def is_pair_task(task: TaskDef) -> bool:
    """Whether the task's examples are text pairs: its reader always yields `text_b`, or its
    `columns` name a `text_b` column for a generic reader (tsv, csv, jsonl)."""
    if "text_b" in task.columns:
        return True
    return task.format in READERS and READERS.get(task.format).pairs


def reader_problems(task: TaskDef) -> list[tuple[str, str]]:
    """(field, message) for every column or reader option the task's reader does not accept."""
    if task.format not in READERS:
        return []
    reader = READERS.get(task.format)
    problems: list[tuple[str, str]] = []
    for key, value in task.columns.items():
        if key not in reader.columns:
            accepted = ", ".join(reader.columns) or "none"
            problems.append((f"columns.{key}", f"format '{reader.name}' does not use column '{key}' (accepted: {accepted})"))
        elif reader.column_kind == "index" and not isinstance(value, int):
            problems.append((f"columns.{key}", f"format '{reader.name}' needs a column position (an integer), got '{value}'"))
        elif reader.column_kind == "name" and not isinstance(value, str):
            problems.append((f"columns.{key}", f"format '{reader.name}' needs a field name, got {value}"))
    for key, required in reader.columns.items():
        if required and key not in task.columns:
            problems.append(("columns", f"format '{reader.name}' needs column '{key}'"))
    for key, value in task.reader_options.items():
        if key not in reader.options:
            accepted = ", ".join(reader.options) or "none"
            problems.append((f"reader_options.{key}", f"format '{reader.name}' has no option '{key}' (accepted: {accepted})"))
        elif not _is_instance(value, reader.options[key]):
            problems.append((f"reader_options.{key}", f"expected {_type_name(reader.options[key])}, got {value!r}"))
    if task.sliding_window is not None and is_pair_task(task):
        problems.append(("sliding_window", "windows cut single texts, and this task's examples are text pairs"))
    if reader.check is not None and not problems:
        problems += reader.check(task)
    return problems


def _is_instance(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
