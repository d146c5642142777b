"""`chemprot_jsonl`: SciBERT's ChemProt, {"text", "label", "metadata"} per line.

The first entity of the pair is wrapped in `<< ... >>` and the second in `[[ ... ]]` (order, not
type). Each text must contain exactly one of each. With `entity_markers: strip` the markers are
removed from the text (the entities stay); with `keep` the text is unchanged. The two entity
strings are kept in `meta` (`e1`, `e2`) either way.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.jsonl import iter_json_lines
from mtbio.data.readers.text import origin
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

FIRST = re.compile(r"<< (.*?) >>")
SECOND = re.compile(r"\[\[ (.*?) \]\]")


@register("chemprot_jsonl")
def read_chemprot(path: Path, task: TaskDef) -> Iterator[Example]:
    """One relation instance per line; label = the fine-grained ChemProt relation."""
    for line_no, record in iter_json_lines(path):
        text, label = record.get("text"), record.get("label")
        if not isinstance(text, str) or not isinstance(label, str):
            raise DataFormatError(path, line_no, "expected string fields 'text' and 'label'")
        first, second = FIRST.findall(text), SECOND.findall(text)
        if len(first) != 1 or len(second) != 1:
            raise DataFormatError(
                path, line_no, f"expected one << >> and one [[ ]] entity marker, found {len(first)} and {len(second)}"
            )
        if task.entity_markers == "strip":
            text = SECOND.sub(r"\1", FIRST.sub(r"\1", text))
        yield Example(
            uid=f"{path.name}:{line_no}",
            label=label,
            text=text,
            origin=origin(path, line_no),
            meta={"e1": first[0], "e2": second[0]},
        )
