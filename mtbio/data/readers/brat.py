"""`brat`: brat standoff (`<id>.txt` + `<id>.ann`) turned into IOB2 token tagging (Chia).

The task's `files` entry names a directory; every `*.txt` in it (sorted) is read with its `.ann`.
Each non-blank line of a `.txt` is one example (Chia: one eligibility criterion per line),
tokenized into words and punctuation (`\\w+|[^\\w\\s]`).

Entities: `T<n><TAB><Type> <start> <end>[;<start> <end>...]<TAB><text>` lines. Only the types
listed in the task's `labels` are tagged; all other types (and relations, `*` groups, notes) are
not part of this task. The character offsets are authoritative (the text column is not compared;
in Chia a few spans include a trailing '\\r' or run past the end of their line, so each fragment
is clipped to the line it starts on and trailing whitespace is trimmed).

* Discontinuous entities (`a b;c d`): each fragment is tagged as its own B-/I- run.
* Overlapping entities: fragments are placed longest first (ties: earliest start); a fragment
  that touches a token already tagged is left out. `meta["overlaps_left_out"]` counts them per
  example, so nothing disappears without a trace.

uid = `<file stem>:<line>`, group = the trial id (file stem before `_inc`/`_exc`), so the
inclusion and exclusion criteria of a trial always land in the same derived split.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import iter_lines, origin, read_text
from mtbio.errors import DataFormatError, MtbioError
from mtbio.tasks.schema import TaskDef, expand_entity_types

TOKEN = re.compile(r"\w+|[^\w\s]")
SPAN = re.compile(r"^(\d+) (\d+)$")


@dataclass(frozen=True)
class Fragment:
    type: str
    start: int
    end: int
    line: int  # line of the .ann file


@register("brat")
def read_brat(path: Path, task: TaskDef) -> Iterator[Example]:
    """Examples (one per text line) from every .txt/.ann pair in the directory `path`."""
    if not path.is_dir():
        raise DataFormatError(path, None, "format 'brat' expects a directory of .txt and .ann files")
    if task.tagging_scheme != "IOB2" or task.label_list != expand_entity_types(task.labels or [], "IOB2"):
        raise MtbioError(f"task '{task.name}': format 'brat' writes IOB2 tags; use tagging_scheme: IOB2 and "
                         "entity types (not tags) as labels")
    types = set(task.labels or [])
    texts = sorted(path.glob("*.txt"))
    if not texts:
        raise DataFormatError(path, None, "no .txt files")
    for text_path in texts:
        ann_path = text_path.with_suffix(".ann")
        if not ann_path.is_file():
            raise DataFormatError(text_path, None, f"no annotation file {ann_path.name} next to it")
        text = read_text(text_path)
        fragments = _read_entities(ann_path, len(text), types)
        yield from _tag_lines(text_path, text, fragments)


def _read_entities(path: Path, text_length: int, types: set[str]) -> list[Fragment]:
    fragments = []
    for line_no, line in iter_lines(path):
        if not line.startswith("T"):
            continue
        cells = line.split("\t")
        if len(cells) < 2 or " " not in cells[1]:
            raise DataFormatError(path, line_no, "expected 'T<n><TAB><Type> <start> <end>[;<start> <end>]<TAB><text>'")
        entity_type, spans = cells[1].split(" ", 1)
        for span in spans.split(";"):
            match = SPAN.match(span.strip())
            if not match:
                raise DataFormatError(path, line_no, f"bad span '{span}' (expected '<start> <end>')")
            start, end = int(match.group(1)), int(match.group(2))
            if not 0 <= start < end <= text_length:
                raise DataFormatError(path, line_no, f"span {start}-{end} outside the text (length {text_length})")
            if entity_type in types:
                fragments.append(Fragment(entity_type, start, end, line_no))
    return fragments


def _tag_lines(path: Path, text: str, fragments: list[Fragment]) -> Iterator[Example]:
    trial = re.sub(r"_(inc|exc)$", "", path.stem)
    offset = 0
    by_line = sorted(fragments, key=lambda f: f.start)
    cursor = 0
    for line_no, line in enumerate(text.split("\n"), start=1):
        line_start, line_end = offset, offset + len(line)
        offset = line_end + 1
        here = []
        while cursor < len(by_line) and by_line[cursor].start < line_end + 1:
            here.append(by_line[cursor])
            cursor += 1
        spans = [m.span() for m in TOKEN.finditer(line)]
        if not spans:
            continue
        tags = ["O"] * len(spans)
        left_out = 0
        clipped = []
        for f in here:
            end = min(f.end, line_end)
            while end > f.start and text[end - 1].isspace():
                end -= 1
            if end > f.start:
                clipped.append((f.type, f.start - line_start, end - line_start))
        for entity_type, start, end in sorted(clipped, key=lambda s: (-(s[2] - s[1]), s[1])):
            covered = [i for i, (a, b) in enumerate(spans) if a < end and b > start]
            if not covered:
                continue
            if any(tags[i] != "O" for i in covered):
                left_out += 1
                continue
            tags[covered[0]] = f"B-{entity_type}"
            for i in covered[1:]:
                tags[i] = f"I-{entity_type}"
        yield Example(
            uid=f"{path.stem}:{line_no}",
            label=tags,
            tokens=[line[a:b] for a, b in spans],
            group=trial,
            origin=origin(path, line_no),
            meta={"overlaps_left_out": str(left_out)},
        )
