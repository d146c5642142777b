"""Data readers: one function per on-disk format, registered by name in `READERS`.

A reader turns one data file (or, for `brat`, one directory) into `Example`s with the raw
labels found on disk; `mtbio.data.loading.read_split` applies the task's `label_map` and checks
every label. Readers never skip a malformed row: they raise `DataFormatError` naming the file
and line.

    @register("tsv", columns={"label": True, "id": False}, options={"header": bool}, inputs="declared")
    def read_tsv(path: Path, task: TaskDef) -> Iterator[Example]: ...

A task definition picks its reader with `format:`; `columns:` and `reader_options:` are
checked against what the reader declares (`reader_problems`). A generic reader (`inputs=`) also maps the
input fields the task's kind declares (`mtbio.tasks.shapes.InputField`) from `columns`, with `input_values`.
"""
from __future__ import annotations

from mtbio.data.readers.base import READERS, Reader, is_pair_task, reader_problems, register
from mtbio.registry import import_modules
from mtbio.tasks.loading import register_name_check
from mtbio.tasks.schema import TaskDef

# Every module here is imported, and each registers its formats: a new format is one module in this package.
import_modules(__name__, __path__)


@register_name_check
def _format_problems(task: TaskDef) -> list[tuple[str, str]]:
    """An unknown `format`, or columns / reader options its reader does not take."""
    if task.format not in READERS:
        return [("format", f"unknown format '{task.format}' (known: {', '.join(READERS.names())})")]
    return reader_problems(task)


__all__ = ["READERS", "Reader", "is_pair_task", "register", "reader_problems"]
