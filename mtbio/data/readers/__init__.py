"""Data readers: one function per on-disk format, registered by name in `READERS`.

A reader turns one data file (or, for `brat`, one directory) into `Example`s with the raw
labels found on disk; `mtbio.data.loading.read_split` applies the task's `label_map` and checks
every label. Readers never skip a malformed row: they raise `DataFormatError` naming the file
and line.

    @register("tsv", columns=TEXT_COLUMNS, options={"header": bool})
    def read_tsv(path: Path, task: TaskDef) -> Iterator[Example]: ...

A task definition picks its reader with `format:`; `columns:` and `reader_options:` are
checked against what the reader declares (`reader_problems`).
"""
from __future__ import annotations

from mtbio.data.readers.base import READERS, Reader, is_pair_task, reader_problems, register

# Each module registers its formats on import.
from mtbio.data.readers import (  # noqa: E402,F401  (imported for registration)
    ade,
    brat,
    chemprot,
    conll,
    delimited,
    hoc,
    jsonl,
    mediqa,
    nli4ct,
    pubmedqa,
)

__all__ = ["READERS", "Reader", "is_pair_task", "register", "reader_problems"]
