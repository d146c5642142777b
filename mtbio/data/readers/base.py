"""The reader registry and what each reader declares about `columns` and `reader_options`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mtbio.data.example import Example
from mtbio.errors import DataFormatError, MtbioError
from mtbio.registry import Registry
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import InputField

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
    `columns` say. `inputs`: "declared" where the task kind's input fields (`mtbio.tasks.shapes.InputField`)
    are columns too, each required as its kind declares it (the generic table readers); "accepted" where they
    are columns the reader's `check` requires when it needs them (`hf`, whose schemas need none); "" where the
    reader knows its own fields.
    """

    name: str
    read: ReadFn
    columns: dict[str, bool] = field(default_factory=dict)
    column_kind: str = "either"
    options: dict[str, type | tuple[type, ...]] = field(default_factory=dict)
    pairs: bool = False
    check: Callable[[TaskDef], list[tuple[str, str]]] | None = None
    inputs: str = ""

    def __call__(self, path: Path, task: TaskDef) -> Iterator[Example]:
        return self.read(path, task)

    def columns_for(self, task: TaskDef) -> dict[str, bool]:
        """Each column key the reader accepts for `task` → whether it is required: its own, and the input fields
        the task's kind declares where the reader maps them."""
        if not self.inputs:
            return dict(self.columns)
        declared = {f.name: f.required and self.inputs == "declared" for f in input_fields(task)}
        return {**declared, **self.columns}


READERS: Registry[Reader] = Registry("format")


def register(
    name: str,
    *,
    columns: dict[str, bool] | None = None,
    column_kind: str = "either",
    options: dict[str, type | tuple[type, ...]] | None = None,
    pairs: bool = False,
    check: Callable[[TaskDef], list[tuple[str, str]]] | None = None,
    inputs: str = "",
) -> Callable[[ReadFn], ReadFn]:
    """Register a read function under `name` (the task definition's `format`)."""

    def decorator(fn: ReadFn) -> ReadFn:
        READERS.register(name)(Reader(name, fn, dict(columns or {}), column_kind, dict(options or {}), pairs,
                                      check, inputs))
        return fn

    return decorator


def input_fields(task: TaskDef) -> tuple[InputField, ...]:
    """The input fields the task's kind declares (none for a type no kind has: the loader reports that)."""
    try:
        return task.kind.inputs.input_fields
    except MtbioError:
        return ()


def input_values(task: TaskDef, values: dict[str, Any], where: Any, line: int | None) -> dict[str, Any]:
    """The `Example` inputs of one record: each declared input field among `values` (the record's value of each
    column key) as its field holds it: a text (a string or a number), a list of texts, a list of words.
    DataFormatError naming the column where a value is none of these."""
    inputs: dict[str, Any] = {}
    for spec in input_fields(task):
        if spec.name not in values:
            continue
        value = values[spec.name]
        if spec.value == "text" and isinstance(value, (str, int)) and not isinstance(value, bool):
            inputs[spec.name] = str(value)
        elif spec.value != "text" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            inputs[spec.name] = list(value)
        else:
            wanted = "a string" if spec.value == "text" else "a list of strings"
            raise DataFormatError(where, line, f"field '{task.columns[spec.name]}' must be {wanted}")
    return inputs


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
    columns = reader.columns_for(task)
    lists = {f.name for f in input_fields(task) if f.value == "texts"}  # a list of texts may name several columns
    problems: list[tuple[str, str]] = []
    for key, value in task.columns.items():
        members = value if isinstance(value, list) and key in lists else [value]
        if key not in columns:
            accepted = ", ".join(columns) or "none"
            problems.append((f"columns.{key}", f"format '{reader.name}' does not use column '{key}' (accepted: {accepted})"))
        elif isinstance(value, list) and key not in lists:
            problems.append((f"columns.{key}", f"names one column, not a list (lists are for a field of several "
                             "texts)"))
        elif reader.column_kind == "index" and not all(isinstance(v, int) for v in members):
            problems.append((f"columns.{key}", f"format '{reader.name}' needs a column position (an integer), got '{value}'"))
        elif reader.column_kind == "name" and not all(isinstance(v, str) for v in members):
            problems.append((f"columns.{key}", f"format '{reader.name}' needs a field name, got {value}"))
    for key, required in columns.items():
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
