"""`conll`: one token per line, fields separated by a tab, a blank line between sentences.

columns (positions; negative counts from the end):
  token   the word (default 0)
  tag     the tag (default -1, the last field)
  group   optional document id column; a cell of "-" continues the previous sentence's document
          (the BLUE ShARe/CLEFE files name the report on a sentence's first token only)

A line starting with `-DOCSTART-` starts a new document; the first word after it (parentheses
removed) becomes the `group` of the following sentences, e.g. `-DOCSTART- (10037531)` → 10037531;
without an id (`-DOCSTART-`, CoNLL-2003's `-DOCSTART- -X- O O`) documents are numbered `<file>-doc<n>`.

reader_options:
  delimiter: str   field separator (default tab)

Every token line must have the same number of fields as the file's first token line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import iter_lines, origin
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef

DOCSTART = "-DOCSTART-"


@register("conll", columns={"token": False, "tag": False, "group": False}, column_kind="index",
          options={"delimiter": str})
def read_conll(path: Path, task: TaskDef) -> Iterator[Example]:
    """Sentences as token lists with one raw tag per token."""
    delimiter = task.reader_options.get("delimiter", "\t")
    token_col = int(task.columns.get("token", 0))
    tag_col = int(task.columns.get("tag", -1))
    group_col = task.columns.get("group")
    width: int | None = None
    group: str | None = None
    tokens: list[str] = []
    tags: list[str] = []
    start = 0
    documents = 0

    def sentence() -> Example:
        return Example(uid=f"{path.name}:{start}", label=tags, tokens=tokens, group=group, origin=origin(path, start))

    for line_no, line in iter_lines(path):
        if line.startswith(DOCSTART):
            if tokens:
                yield sentence()
                tokens, tags = [], []
            documents += 1
            words = line[len(DOCSTART):].split()
            doc_id = words[0].strip("()") if words and words[0] != "-X-" else ""  # CoNLL-2003: -DOCSTART- -X- O O
            group = doc_id or f"{path.stem}-doc{documents}"
            continue
        if not line.strip():
            if tokens:
                yield sentence()
                tokens, tags = [], []
            continue
        cells = line.split(delimiter)
        if width is None:
            width = len(cells)
            for key, col in (("token", token_col), ("tag", tag_col), ("group", group_col)):
                if col is not None and not -width <= int(col) < width:
                    raise DataFormatError(path, line_no, f"column '{key}' is at position {col} but lines have {width} fields")
            if width < 2:
                raise DataFormatError(path, line_no, f"expected a token and a tag separated by {delimiter!r}, found one field")
        elif len(cells) != width:
            raise DataFormatError(path, line_no, f"expected {width} fields separated by {delimiter!r}, found {len(cells)}")
        tag = cells[tag_col].strip()
        if not tag:
            raise DataFormatError(path, line_no, "empty tag")
        if not cells[token_col].strip():
            raise DataFormatError(path, line_no, "empty token")
        if not tokens:
            start = line_no
            if group_col is not None and cells[int(group_col)].strip() not in ("", "-"):
                group = cells[int(group_col)].strip()
        tokens.append(cells[token_col])
        tags.append(tag)
    if tokens:
        yield sentence()
