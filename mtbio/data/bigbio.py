"""Rows in a BigBio schema (github.com/bigbio/biomedical, `bigbiohub.py`) turned into `Example`s.

    bigbio_kb     tagging: one example per passage (`unit: passage`) or document (`unit: document`),
                  entities → word tags in the task's tagging_scheme;
                  classification: one example per relation, its arguments wrapped in `markers`
    bigbio_pairs  text_1, text_2, label → a pair (classification, or regression with a float label)
    bigbio_te     premise, hypothesis, label → a pair, as bigbio_pairs
    bigbio_text   text, labels → classification (exactly one label) or multilabel
    bigbio_qa     question, context, answer → classification (yes/no/maybe): text_b = the context

Tagging (bigbio_kb). Entity offsets are document offsets, as are the passages'. Words are `\\w+|[^\\w\\s]`
(`word_split: punctuation`, default) or whitespace-separated (`whitespace`). Tags carry the dataset's
entity types; the task's `label_map` (tag → tag) applies afterwards, as for every reader. The entities
kept are those of `entity_types`, by default those whose tags (after `label_map`) are the task's tags.
Decisions, each counted in one info line per split:
* a word is tagged when an entity fragment covers its first character; a fragment boundary inside a
  word is counted ("boundaries inside a word") and an entity that covers no word start is dropped;
* a discontiguous entity tags each fragment as its own run (B-/I-...), like the `brat` reader;
* overlapping or nested entities: the entities are placed whole, `overlaps: longest` (default:
  most characters first, ties by earliest start) or `first` (earliest start first, ties longest);
  one that touches a word already tagged is dropped. An entity repeated with the same type and
  offsets is placed once. Entities outside every passage, and passages without words, are dropped.

Relations (bigbio_kb, classification): each relation of `relation_types` (default: all) whose two
arguments are entities in the same passage text becomes that text with arg1 wrapped in markers[0:2]
and arg2 in markers[2:4] (the whole extent of a discontiguous argument; no markers with
`entity_markers: strip`), label = the relation type, meta e1/e2 = the arguments' text, as the
`chemprot_jsonl` reader. A relation whose arguments are not entities within one passage text is
counted and skipped.

uid: the row's `id`, plus `:p<i>` (passage) or `:r<i>` (relation); origin: "<source>:<row>".
"""
from __future__ import annotations

import logging
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mtbio.data.example import Example, Label
from mtbio.errors import DataFormatError, MtbioError
from mtbio.tasks.schema import TaskDef, expand_entity_types
from mtbio.tasks.shapes import describe_shape

log = logging.getLogger(__name__)

SCHEMAS: tuple[str, ...] = ("bigbio_kb", "bigbio_pairs", "bigbio_te", "bigbio_text", "bigbio_qa")
SCHEMA_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "entity_types": list, "overlaps": str, "word_split": str, "unit": str, "markers": list, "relation_types": list,
}
CHOICES = {"overlaps": ("longest", "first"), "word_split": ("punctuation", "whitespace"), "unit": ("passage", "document")}
DEFAULT_MARKERS = ("<< ", " >>", "[[ ", " ]]")
WORDS = {"punctuation": re.compile(r"\w+|[^\w\s]"), "whitespace": re.compile(r"\S+")}
PAIR_FIELDS = {"bigbio_pairs": ("text_1", "text_2"), "bigbio_te": ("premise", "hypothesis")}


def check_schema_options(options: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each schema option whose value cannot be used."""
    problems = []
    for key, value in options.items():
        if key not in SCHEMA_OPTIONS:
            continue
        where = f"reader_options.{key}"
        if options.get("schema") != "bigbio_kb":
            problems.append((where, "applies to schema bigbio_kb only"))
        elif key in CHOICES and value not in CHOICES[key]:
            problems.append((where, f"must be one of {', '.join(CHOICES[key])}, got {value!r}"))
        elif isinstance(value, list) and not all(isinstance(x, str) and x for x in value):
            problems.append((where, "must be a list of non-empty strings"))
        elif key == "markers" and isinstance(value, list) and len(value) != 4:
            problems.append((where, f"must be four strings (arg1 open, close, arg2 open, close), got {len(value)}"))
    return problems


def examples_from_schema(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef,
                         source: str) -> Iterator[Example]:
    """The examples of one split's rows; a malformed row raises DataFormatError(source, row, ...)."""
    if schema not in SCHEMAS:
        raise MtbioError(f"{source}: unknown schema '{schema}' (known: {', '.join(SCHEMAS)})")
    convert = {"bigbio_kb": _kb, "bigbio_text": _text, "bigbio_qa": _qa}.get(schema, _pair)
    return convert(records, schema, task, source)


def _pair(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef, source: str) -> Iterator[Example]:
    _require_form(task, schema, ("class", "number"))
    first, second = PAIR_FIELDS[schema]
    for row, record in enumerate(records, start=1):
        yield _example(record, source, row, _one_label(task, record.get("label"), source, row),
                       text=_string(record, first, source, row), text_b=_string(record, second, source, row))


def _text(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef, source: str) -> Iterator[Example]:
    _require_form(task, schema, ("class", "classes", "number"))
    for row, record in enumerate(records, start=1):
        labels = _strings(record, "labels", source, row)
        try:
            label = task.kind.labels.from_strings(labels)
        except ValueError as error:
            raise DataFormatError(source, row, f"a {task.type} {error}") from None
        yield _example(record, source, row, label, text=_string(record, "text", source, row))


def _qa(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef, source: str) -> Iterator[Example]:
    _require_form(task, schema, ("class",))
    for row, record in enumerate(records, start=1):
        answer = _strings(record, "answer", source, row)
        if len(answer) != 1:
            raise DataFormatError(source, row, f"expected one answer (yes/no/maybe), the row has {len(answer)}")
        context = record.get("context")
        if isinstance(context, list) and all(isinstance(x, str) for x in context):
            context = " ".join(context)
        if not isinstance(context, str):
            raise DataFormatError(source, row, "expected 'context' to be a string (or a list of strings)")
        yield _example(record, source, row, answer[0], text=_string(record, "question", source, row), text_b=context)


def _kb(records: Iterable[Mapping[str, Any]], schema: str, task: TaskDef, source: str) -> Iterator[Example]:
    _require_form(task, schema, ("tags", "class"))
    return _tag(records, task, source) if task.kind.labels.per_word else _relations(records, task, source)


@dataclass(frozen=True)
class _Span:
    """A passage text fragment, or an entity with its fragments, in document offsets."""

    id: str
    type: str
    fragments: tuple[tuple[int, int], ...]
    text: str = ""

    @property
    def start(self) -> int:
        return min(s for s, _ in self.fragments)

    @property
    def end(self) -> int:
        return max(e for _, e in self.fragments)

    @property
    def size(self) -> int:
        return sum(e - s for s, e in self.fragments)


def _tag(records: Iterable[Mapping[str, Any]], task: TaskDef, source: str) -> Iterator[Example]:
    options = task.reader_options
    words_re = WORDS[options.get("word_split", "punctuation")]
    by_document = options.get("unit", "passage") == "document"
    keep = _type_filter(task)
    order = (lambda e: (-e.size, e.start)) if options.get("overlaps", "longest") == "longest" else \
        (lambda e: (e.start, -e.size))
    counts: Counter[str] = Counter()
    for row, record in enumerate(records, start=1):
        units = [(p.start, p.end, [(m.group(), p.start + m.start(), p.start + m.end()) for m in words_re.finditer(p.text)])
                 for p in _passages(record, source, row)]
        if by_document and units:
            units = [(units[0][0], units[-1][1], [w for _, _, words in units for w in words])]
        entities = list(dict.fromkeys(_Span("", e.type, e.fragments) for e in _entities(record, source, row)
                                      if keep(e.type)))
        counts["discontiguous"] += sum(len(e.fragments) > 1 for e in entities)
        outside = set(entities)
        for i, (start, end, words) in enumerate(units):
            inside = sorted((e for e in entities if start <= e.start and e.end <= end), key=order)
            outside -= set(inside)
            if words:
                tags = _tags(words, inside, task.tagging_scheme or "IOB2", counts)
                yield _example(record, source, row, tags, tokens=[w for w, _, _ in words],
                               suffix="" if by_document else f":p{i}")
        counts["outside every passage"] += len(outside)
    log.info("%s: %d entities dropped as overlapping, %d covering no word start, %d outside every passage; "
             "%d discontiguous (each fragment tagged), %d with a boundary inside a word", source,
             counts["overlapping"], counts["covering no word start"], counts["outside every passage"],
             counts["discontiguous"], counts["inside a word"])


def _tags(words: list[tuple[str, int, int]], entities: list[_Span], scheme: str, counts: Counter[str]) -> list[str]:
    """The tags of one unit's words, the entities placed in the given order."""
    starts, ends = [a for _, a, _ in words], [z for _, _, z in words]
    tags = ["O"] * len(words)
    for entity in entities:
        runs = [range(bisect_left(starts, s), bisect_left(starts, e)) for s, e in entity.fragments]
        counts["inside a word"] += any(starts[k] < b < ends[k] for s, e in entity.fragments for b in (s, e)
                                       for k in [bisect_right(starts, b) - 1] if k >= 0)
        covered = [k for run in runs for k in run]
        if not covered:
            counts["covering no word start"] += 1
        elif any(tags[k] != "O" for k in covered):
            counts["overlapping"] += 1
        else:
            for run in filter(None, runs):
                tags[run.start:run.stop] = _run_tags(entity.type, len(run), scheme)
    return tags


def _relations(records: Iterable[Mapping[str, Any]], task: TaskDef, source: str) -> Iterator[Example]:
    options = task.reader_options
    markers = ("", "", "", "") if task.entity_markers == "strip" else tuple(options.get("markers", DEFAULT_MARKERS))
    wanted = options.get("relation_types")
    skipped = 0
    for row, record in enumerate(records, start=1):
        entities = {e.id: e for e in _entities(record, source, row)}
        passages = _passages(record, source, row)
        for i, relation in enumerate(_list(record, "relations", source, row)):
            if not isinstance(relation, Mapping) or not isinstance(relation.get("type"), str):
                raise DataFormatError(source, row, f"relation {i}: expected a mapping with a string 'type'")
            if wanted is not None and relation["type"] not in wanted:
                continue
            args = [entities.get(relation.get(key)) for key in ("arg1_id", "arg2_id")]
            holder = next((p for p in passages if all(a and p.start <= a.start and a.end <= p.end for a in args)), None)
            if holder is None:
                skipped += 1
                continue
            (s1, e1), (s2, e2) = ((a.start - holder.start, a.end - holder.start) for a in args)  # type: ignore[union-attr]
            yield _example(record, source, row, relation["type"], suffix=f":r{i}",
                           text=_mark(holder.text, [(s1, e1, markers[0], markers[1]), (s2, e2, markers[2], markers[3])]),
                           meta={"e1": holder.text[s1:e1], "e2": holder.text[s2:e2]})
    log.info("%s: %d relations skipped (an argument is not an entity, or the two are not in one passage)",
             source, skipped)


def _mark(text: str, args: list[tuple[int, int, str, str]]) -> str:
    """`text` with each (start, end, open, close) wrapped: closings before openings at one position,
    an outer span opened before and closed after an inner one."""
    inserts = []
    for start, end, opening, closing in args:
        inserts += [(start, 1, -(end - start), opening), (end, 0, end - start, closing)]
    pieces, at = [], 0
    for position, _, _, marker in sorted(inserts, key=lambda x: x[:3]):
        pieces += [text[at:position], marker]
        at = position
    return "".join(pieces) + text[at:]


def _run_tags(entity_type: str, n: int, scheme: str) -> list[str]:
    if scheme == "IO":
        return [f"I-{entity_type}"] * n
    if scheme == "IOBES":
        return [f"S-{entity_type}"] if n == 1 else \
            [f"B-{entity_type}"] + [f"I-{entity_type}"] * (n - 2) + [f"E-{entity_type}"]
    return [f"B-{entity_type}"] + [f"I-{entity_type}"] * (n - 1)


def _type_filter(task: TaskDef) -> Callable[[str], bool]:
    """Whether an entity type is tagged: it is in `entity_types`, or by default its tags (after
    `label_map`) are tags of the task."""
    if "entity_types" in task.reader_options:
        return set(task.reader_options["entity_types"]).__contains__
    allowed, scheme = set(task.label_list), task.tagging_scheme or "IOB2"
    return lambda t: all(task.label_map.get(tag, tag) in allowed for tag in expand_entity_types([t], scheme)[1:])


def _passages(record: Mapping[str, Any], source: str, row: int) -> list[_Span]:
    """Every text fragment of every passage, in order."""
    fragments = []
    for i, passage in enumerate(_list(record, "passages", source, row)):
        offsets = _offsets(passage, f"passage {i}", source, row)
        texts = passage.get("text")
        if not isinstance(texts, list) or len(texts) != len(offsets) or not all(isinstance(t, str) for t in texts):
            raise DataFormatError(source, row, f"passage {i}: expected one text string per offset pair")
        for text, (start, end) in zip(texts, offsets):
            if len(text) != end - start:
                raise DataFormatError(source, row, f"passage {i}: text of {len(text)} characters at offsets {start}-{end}")
            fragments.append(_Span(str(passage.get("id")), "", ((start, end),), text))
    return fragments


def _entities(record: Mapping[str, Any], source: str, row: int) -> list[_Span]:
    entities = []
    for i, entity in enumerate(_list(record, "entities", source, row)):
        if not isinstance(entity, Mapping) or not isinstance(entity.get("type"), str):
            raise DataFormatError(source, row, f"entity {i}: expected a mapping with a string 'type'")
        entities.append(_Span(str(entity.get("id")), entity["type"], _offsets(entity, f"entity {i}", source, row)))
    return entities


def _offsets(item: Mapping[str, Any], what: str, source: str, row: int) -> tuple[tuple[int, int], ...]:
    offsets = item.get("offsets") if isinstance(item, Mapping) else None
    if not isinstance(offsets, list) or not offsets or not all(
            isinstance(o, (list, tuple)) and len(o) == 2 and all(isinstance(x, int) for x in o) and 0 <= o[0] <= o[1]
            for o in offsets):
        raise DataFormatError(source, row, f"{what}: expected 'offsets' as a list of [start, end] pairs")
    return tuple((int(s), int(e)) for s, e in offsets)


def _example(record: Mapping[str, Any], source: str, row: int, label: Label, suffix: str = "",
             **fields: Any) -> Example:
    uid = _string(record, "id", source, row)
    group = record.get("document_id")
    return Example(uid=f"{uid}{suffix}", label=label, group=group if isinstance(group, str) and group else uid,
                   origin=f"{source}:{row}", **fields)


def _one_label(task: TaskDef, value: Any, source: str, row: int) -> Label:
    try:
        return task.kind.labels.from_value(value)
    except ValueError as error:
        raise DataFormatError(source, row, f"a {task.type} {error}") from None


def _require_form(task: TaskDef, schema: str, forms: tuple[str, ...]) -> None:
    if task.kind.labels.name not in forms:
        raise MtbioError(f"task '{task.name}': schema {schema} gives examples labelled with "
                         f"{' or '.join(map(describe_shape, forms))}, which a {task.type} task does not take")


def _string(record: Mapping[str, Any], key: str, source: str, row: int) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise DataFormatError(source, row, f"expected a string field '{key}', got {value!r}")
    return value


def _strings(record: Mapping[str, Any], key: str, source: str, row: int) -> list[str]:
    value = _list(record, key, source, row)
    if not all(isinstance(x, str) for x in value):
        raise DataFormatError(source, row, f"expected '{key}' to be a list of strings, got {value!r}")
    return value


def _list(record: Mapping[str, Any], key: str, source: str, row: int) -> list[Any]:
    value = record.get(key, [])
    if not isinstance(value, list):
        raise DataFormatError(source, row, f"expected a list field '{key}', got {type(value).__name__}")
    return value
