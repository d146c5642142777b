"""`mediqa_rqe_xml`: MEDIQA 2019 RQE pairs, `<pair pid=".." value="true|false"><chq/><faq/></pair>`.

text = the consumer health question (chq), text_b = the FAQ (faq), label = `value`, uid = pid.
Whitespace inside questions is collapsed. A pair without pid, value, <chq> or <faq> is an error;
an empty question is kept as "" (pair 5860 of the AMIA 2016 training set has an empty FAQ and
is counted among its 8,588 pairs).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator
from xml.parsers import expat

from mtbio.data.example import Example
from mtbio.data.readers.base import register
from mtbio.data.readers.text import origin, read_text
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef


@register("mediqa_rqe_xml", pairs=True)
def read_mediqa_rqe(path: Path, task: TaskDef) -> Iterator[Example]:
    """One question pair per `<pair>` element."""
    pairs: list[Example] = []
    state: dict[str, object] = {}
    parser = expat.ParserCreate(encoding="UTF-8")  # the text is already decoded; ignore a declared encoding

    def start(name: str, attrs: dict[str, str]) -> None:
        line = parser.CurrentLineNumber
        if name == "pair":
            if state:
                raise DataFormatError(path, line, "<pair> inside another <pair>")
            state.update(line=line, attrs=attrs, chq=None, faq=None)
        elif name in ("chq", "faq"):
            if not state:
                raise DataFormatError(path, line, f"<{name}> outside a <pair>")
            state["field"], state[name] = name, []

    def text(data: str) -> None:
        if state.get("field"):
            state[str(state["field"])].append(data)  # type: ignore[union-attr]

    def end(name: str) -> None:
        if name in ("chq", "faq"):
            state["field"] = None
        elif name == "pair":
            pairs.append(_pair(path, state))
            state.clear()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(read_text(path).encode("utf-8"), True)
    except expat.ExpatError as exc:
        raise DataFormatError(path, exc.lineno, f"invalid XML: {expat.ErrorString(exc.code)}") from None
    return iter(pairs)


def _pair(path: Path, state: dict[str, object]) -> Example:
    line = int(state["line"])  # type: ignore[call-overload]
    attrs: dict[str, str] = state["attrs"]  # type: ignore[assignment]
    for key in ("pid", "value"):
        if key not in attrs:
            raise DataFormatError(path, line, f"<pair> without the '{key}' attribute")
    questions = {}
    for name in ("chq", "faq"):
        parts = state.get(name)
        if parts is None:
            raise DataFormatError(path, line, f"pair {attrs['pid']}: no <{name}>")
        questions[name] = " ".join("".join(parts).split())  # type: ignore[arg-type]
    meta = {"type": attrs["type"]} if "type" in attrs else {}
    return Example(uid=attrs["pid"], label=attrs["value"], text=questions["chq"], text_b=questions["faq"],
                   origin=origin(path, line), meta=meta)
