"""`ade`: ADE Corpus V2 as sentence classification (does the sentence report an adverse drug effect?).

Two files make the corpus; the reader tells them apart by suffix:

* `*.rel` (DRUG-AE.rel): `PMID|sentence|effect|begin|end|drug|begin|end`, one row per drug→effect
  relation. Rows of the same (PMID, sentence) become ONE example labelled `ADE`, whose meta
  lists the pairs (`pairs`: "drug → effect; ..."). 6,821 rows → 4,272 sentences.
* anything else (ADE-NEG.txt): `PMID NEG sentence`, one example labelled `noADE` per line.

Why sentence classification rather than relation classification: ADE-NEG sentences carry no
entity annotation, so they cannot provide negative drug/effect pairs, and DRUG-AE.rel holds
positive pairs only. group = PMID, so a derived split keeps each abstract in one split.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import iter_lines, origin
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

POSITIVE, NEGATIVE = "ADE", "noADE"


@register("ade")
def read_ade(path: Path, task: TaskDef) -> Iterator[Example]:
    """Positive sentences from a .rel file, negative sentences from ADE-NEG.txt."""
    return _read_relations(path) if path.suffix == ".rel" else _read_negatives(path)


def _read_relations(path: Path) -> Iterator[Example]:
    sentences: dict[tuple[str, str], Example] = {}
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) < 8:
            raise DataFormatError(path, line_no, f"expected 8 '|'-separated fields, found {len(cells)}")
        # the sentence is the only free-text field that could contain '|': take the fixed fields from both ends
        pmid, effect, drug = cells[0], cells[-6], cells[-3]
        sentence = "|".join(cells[1:-6])
        if not pmid.strip().isdigit():
            raise DataFormatError(path, line_no, f"PMID must be a number, got '{pmid}'")
        for offset in cells[-5:-3] + cells[-2:]:
            if not offset.strip().isdigit():
                raise DataFormatError(path, line_no, f"offset must be a number, got '{offset}'")
        key = (pmid, sentence)
        if key not in sentences:
            sentences[key] = Example(uid=f"{path.name}:{line_no}", label=POSITIVE, text=sentence, group=pmid,
                                     origin=origin(path, line_no), meta={"pairs": ""})
        pairs = sentences[key].meta["pairs"]
        sentences[key].meta["pairs"] = f"{pairs}; {drug} → {effect}" if pairs else f"{drug} → {effect}"
    return iter(sentences.values())


def _read_negatives(path: Path) -> Iterator[Example]:
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        pmid, marker, sentence = (line.split(" ", 2) + ["", ""])[:3]
        if marker != "NEG" or not pmid.isdigit() or not sentence.strip():
            raise DataFormatError(path, line_no, "expected 'PMID NEG sentence'")
        yield Example(uid=f"{path.name}:{line_no}", label=NEGATIVE, text=sentence, group=pmid, origin=origin(path, line_no))
