"""`hoc`: BLURB's Hallmarks of Cancer TSV, header `labels<TAB>sentence<TAB>index`.

`labels` holds ten `k_v` items (k = hallmark index 0-9, v = 0/1); the raw label is the list of
indices k with v = 1 (map them to names with `label_map`). `index` is `<PMID>_s<n>`: it is the
uid and its PMID the `group`, so sentence predictions can be aggregated per abstract as BLURB
scores HoC.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import iter_lines, origin
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

HEADER = ["labels", "sentence", "index"]


@register("hoc")
def read_hoc(path: Path, task: TaskDef) -> Iterator[Example]:
    """One sentence per row with its positive hallmark indices."""
    lines = iter_lines(path)
    first = next(lines, None)
    if first is None or first[1].split("\t") != HEADER:
        raise DataFormatError(path, 1, f"expected the header {'<TAB>'.join(HEADER)}")
    for line_no, line in lines:
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != 3:
            raise DataFormatError(path, line_no, f"expected 3 tab-separated fields, found {len(cells)}")
        items, sentence, index = cells
        positives = []
        for item in items.split(","):
            key, sep, value = item.strip().partition("_")
            if not sep or not key.isdigit() or value not in ("0", "1"):
                raise DataFormatError(path, line_no, f"bad label item '{item}' (expected k_0 or k_1)")
            if value == "1":
                positives.append(key)
        pmid, sep, _ = index.partition("_s")
        if not sep or not pmid:
            raise DataFormatError(path, line_no, f"bad index '{index}' (expected <PMID>_s<n>)")
        yield Example(uid=index, label=positives, text=sentence, group=pmid, origin=origin(path, line_no))
