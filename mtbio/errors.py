"""Errors that mtbio reports to users as one clear line (the CLI prints them without a traceback)."""
from __future__ import annotations

from pathlib import Path


class MtbioError(Exception):
    """Base class: a problem the user can fix. The CLI prints `str(error)` and exits non-zero."""


class TaskDefinitionError(MtbioError):
    """A task definition (YAML) is invalid. Names the file, the task and the field."""

    def __init__(self, path: Path | str, task: str | None, field: str | None, message: str):
        self.path, self.task, self.field, self.message = str(path), task, field, message
        where = self.path
        if task:
            where += f": task '{task}'"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {message}")


class DataFormatError(MtbioError):
    """A data file does not match its declared format. Names the file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line, self.message = str(path), line, message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class MissingDataError(MtbioError):
    """A task's data files are not under the data directory."""
