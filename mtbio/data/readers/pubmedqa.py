"""`pubmedqa`: PubMedQA's `ori_pqal.json` format, as used by BLURB's split files.

A JSON object keyed by PMID; each entry has QUESTION, CONTEXTS (list of abstract passages
without the conclusion) and final_decision (yes/no/maybe). BLURB uses the official split:
`pqal_fold0/train_set.json` (450), `pqal_fold0/dev_set.json` (50) and `test_set.json` (500),
all in this format. text = question, text_b = the contexts joined by spaces, group = PMID.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import KeyLines, load_json, origin, read_text, require_fields
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

FIELDS = ("QUESTION", "CONTEXTS", "final_decision")


@register("pubmedqa", pairs=True)
def read_pubmedqa(path: Path, task: TaskDef) -> Iterator[Example]:
    """One question per PMID."""
    text = read_text(path)
    data = load_json(path, text)
    if not isinstance(data, dict):
        raise DataFormatError(path, 1, "expected a JSON object keyed by PMID")
    lines = KeyLines(text)
    for pmid, entry in data.items():
        line = lines.line_of(pmid)
        require_fields(entry, FIELDS, path, line, f"entry {pmid}", strings=("QUESTION", "final_decision"))
        contexts = entry["CONTEXTS"]
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise DataFormatError(path, line, f"entry {pmid}: CONTEXTS must be a list of strings")
        yield Example(
            uid=pmid,
            label=entry["final_decision"],
            text=entry["QUESTION"],
            text_b=" ".join(c.strip() for c in contexts),
            group=pmid,
            origin=origin(path, line),
        )
