"""BigBio schemas → Examples: hand-checked fixtures per schema, and BC5CDR-chem and ChemProt written out
as bigbio_kb and read back equal to their raw readers' examples."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mtbio.data.bigbio import SCHEMA_OPTIONS, SCHEMAS, check_schema_options, examples_from_schema
from mtbio.data.example import Example
from mtbio.data.loading import read_split
from mtbio.data.readers import READERS
from mtbio.data.readers.chemprot import FIRST, SECOND
from mtbio.errors import DataFormatError, MtbioError
from mtbio.tasks.loading import load_task_def, split_paths
from mtbio.tasks.schema import TaskDef

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "bigbio"


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def _task(type_: str, labels: list[str] | None = None, **fields: Any) -> TaskDef:
    base: dict[str, Any] = {"name": "t", "type": type_, "format": "hf", "files": {"train": "x"}, "metric": "accuracy",
                            "labels": labels}
    if type_ == "tagging":
        base["tagging_scheme"] = "IOB2"
    return TaskDef.model_validate({**base, **fields})


def _convert(name: str, task: TaskDef, schema: str | None = None) -> list[Example]:
    return list(examples_from_schema(_rows(name), schema or f"bigbio_{name}", task, f"fixture/{name}:train"))


NER = ["Chemical", "Disease"]


def test_contract_names() -> None:
    assert SCHEMAS == ("bigbio_kb", "bigbio_pairs", "bigbio_te", "bigbio_text", "bigbio_qa")
    assert set(SCHEMA_OPTIONS) == {"entity_types", "overlaps", "word_split", "unit", "markers", "relation_types"}


def test_kb_tagging_fixture(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mtbio.data.bigbio"):
        examples = _convert("kb", _task("tagging", NER, reader_options={"schema": "bigbio_kb"}))
    assert [(ex.uid, ex.tokens, ex.label, ex.group, ex.origin) for ex in examples] == [
        ("1:p0", ["Aspirin", "-", "induced", "asthma", "."],
         ["B-Chemical", "O", "O", "B-Disease", "O"], "doc1", "fixture/kb:train:1"),
        ("1:p1", ["Low", "-", "dose", "aspirin", "and", "ibuprofen", "inhibit", "COX", "-", "1", "."],
         ["O", "O", "O", "B-Chemical", "O", "B-Chemical", "O", "O", "O", "O", "O"], "doc1", "fixture/kb:train:1"),
        # ATP (7-10) tags the word ATPase (it covers its start); TPase (8-13) covers no word start; the
        # discontiguous "breast ... cancer" (12 characters) loses to "ovarian cancer" (14)
        ("2:p0", ["Na", "+", "/", "K", "+", "-", "ATPase", "and", "breast", "or", "ovarian", "cancer"],
         ["B-Chemical", "O", "O", "O", "O", "O", "B-Chemical", "O", "O", "O", "B-Disease", "I-Disease"], "doc2",
         "fixture/kb:train:2"),
    ]
    # T4 repeats T3 (same type and offsets): placed once, not counted as an overlap
    assert ("fixture/kb:train: 1 entities dropped as overlapping, 1 covering no word start, 0 outside every passage; "
            "1 discontiguous (each fragment tagged), 2 with a boundary inside a word") in caplog.messages


def test_kb_tagging_options() -> None:
    first = _convert("kb", _task("tagging", NER, reader_options={"schema": "bigbio_kb", "overlaps": "first"}))
    assert first[2].label[8:] == ["B-Disease", "O", "O", "B-Disease"]  # each fragment of breast ... cancer
    spaces = _convert("kb", _task("tagging", NER, reader_options={"schema": "bigbio_kb", "word_split": "whitespace"}))
    assert (spaces[2].tokens, spaces[2].label) == (
        ["Na+/K+-ATPase", "and", "breast", "or", "ovarian", "cancer"],
        ["B-Chemical", "O", "O", "O", "B-Disease", "I-Disease"])
    whole = _convert("kb", _task("tagging", NER, reader_options={"schema": "bigbio_kb", "unit": "document"}))
    assert [ex.uid for ex in whole] == ["1", "2"] and whole[0].tokens == first[0].tokens + first[1].tokens
    genes = _convert("kb", _task("tagging", ["Gene", "Chemical"], tagging_scheme="IOBES",
                                 reader_options={"schema": "bigbio_kb", "entity_types": ["Gene"]}))
    assert genes[1].label[7:10] == ["B-Gene", "I-Gene", "E-Gene"]
    assert genes[2].label == ["B-Gene", "I-Gene", "I-Gene", "I-Gene", "I-Gene", "I-Gene", "E-Gene"] + ["O"] * 5
    mapped = _convert("kb", _task("tagging", ["Drug"], tagging_scheme="IO", label_map={"I-Chemical": "I-Drug"},
                                  reader_options={"schema": "bigbio_kb"}))
    assert mapped[1].label == ["O", "O", "O", "I-Chemical", "O", "I-Chemical"] + ["O"] * 5  # read_split maps them


RELATIONS = ["CAUSES", "INHIBITOR", "PART_OF"]


def test_kb_relation_fixture(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mtbio.data.bigbio"):
        examples = _convert("kb", _task("classification", RELATIONS, reader_options={"schema": "bigbio_kb"}))
    assert [(ex.uid, ex.text, ex.label, ex.meta) for ex in examples] == [
        ("1:r0", "Low-dose aspirin and << ibuprofen >> inhibit [[ COX-1 ]].", "INHIBITOR",
         {"e1": "ibuprofen", "e2": "COX-1"}),
        ("1:r1", "<< Aspirin >>-induced [[ asthma ]].", "CAUSES", {"e1": "Aspirin", "e2": "asthma"}),
        # R3's arguments are in different passages; arg2 (the gene) holds arg1
        ("2:r0", "[[ << Na >>+/K+-ATPase ]] and breast or ovarian cancer", "PART_OF",
         {"e1": "Na", "e2": "Na+/K+-ATPase"}),
    ]
    assert ("fixture/kb:train: 1 relations skipped (an argument is not an entity, or the two are not in one "
            "passage)") in caplog.messages
    custom = _convert("kb", _task("classification", RELATIONS, reader_options={
        "schema": "bigbio_kb", "relation_types": ["CAUSES"], "markers": ["@", "@", "$", "$"]}))
    assert [(ex.uid, ex.text) for ex in custom] == [("1:r1", "@Aspirin@-induced $asthma$.")]
    plain = _convert("kb", _task("classification", RELATIONS, entity_markers="strip",
                                 reader_options={"schema": "bigbio_kb"}))
    assert plain[1].text == "Aspirin-induced asthma." and plain[1].meta == {"e1": "Aspirin", "e2": "asthma"}


def test_pairs_te_text_qa_fixtures() -> None:
    pairs = _convert("pairs", _task("regression", metric="pearson"))
    assert [(ex.uid, ex.text, ex.text_b, ex.label, ex.group) for ex in pairs] == [
        ("s1", "The patient has a fever.", "The patient is febrile.", 4.5, "d1"),
        ("s2", "Take one tablet daily.", "No known drug allergies.", 0.0, "d2"),
    ]
    te = _convert("te", _task("classification", ["entailment", "contradiction", "neutral"]))
    assert [(ex.uid, ex.text, ex.text_b, ex.label, ex.group) for ex in te] == [
        ("t1", "She was given aspirin for chest pain.", "She received a drug.", "entailment", "t1"),
        ("t2", "The biopsy was negative.", "The biopsy showed cancer.", "contradiction", "t2"),
    ]
    hallmarks = ["resisting cell death", "angiogenesis", "replicative immortality", "invasion"]
    text = _convert("text", _task("multilabel", hallmarks))
    assert [(ex.uid, ex.text, ex.text_b, ex.label) for ex in text] == [
        ("a1", "Tumour cells evade apoptosis.", None, ["resisting cell death"]),
        ("a2", "New vessels feed the tumour.", None, ["angiogenesis"]),
        ("a3", "Cells divide without limit and invade tissue.", None, ["replicative immortality", "invasion"]),
    ]
    qa = _convert("qa", _task("classification", ["yes", "no", "maybe"]))
    assert [(ex.uid, ex.text, ex.text_b, ex.label, ex.group) for ex in qa] == [
        ("q1", "Do mitochondria play a role in remodelling lace plant leaves?",
         "Programmed cell death occurs in lace plant leaves. Mitochondria change during it.", "yes", "21645374"),
        ("q2", "Is vitamin C a treatment for the common cold?", "Trials show no benefit of regular vitamin C.", "no",
         "16418930"),
    ]


def test_bad_rows_name_dataset_split_and_row() -> None:
    with pytest.raises(DataFormatError, match=r"^fixture/text:train:3: a classification task needs exactly one label, "
                                              r"the row has 2$"):
        _convert("text", _task("classification", ["a", "b"]))
    rows = _rows("kb")
    rows[1]["passages"][0]["offsets"] = [[0, 40]]
    with pytest.raises(DataFormatError, match=r"^bigbio/x:dev:2: passage 0: text of 42 characters at offsets 0-40$"):
        list(examples_from_schema(rows, "bigbio_kb", _task("tagging", NER), "bigbio/x:dev"))
    with pytest.raises(DataFormatError, match=r"^fixture/pairs:train:1: a regression label must be a number"):
        list(examples_from_schema([{"id": "1", "text_1": "a", "text_2": "b", "label": "high"}], "bigbio_pairs",
                                  _task("regression", metric="pearson"), "fixture/pairs:train"))
    with pytest.raises(MtbioError, match="schema bigbio_qa gives examples labelled with one class, which a multilabel task does not take"):
        _convert("qa", _task("multilabel", ["yes"]))


def test_check_schema_options() -> None:
    assert check_schema_options({"schema": "bigbio_kb", "overlaps": "first", "markers": ["<", ">", "[", "]"]}) == []
    assert check_schema_options({"schema": "bigbio_kb", "overlaps": "all", "word_split": "x", "unit": "sentence",
                                 "markers": ["<", ">"], "entity_types": ["", 3]}) == [
        ("reader_options.overlaps", "must be one of longest, first, got 'all'"),
        ("reader_options.word_split", "must be one of punctuation, whitespace, got 'x'"),
        ("reader_options.unit", "must be one of passage, document, got 'sentence'"),
        ("reader_options.markers", "must be four strings (arg1 open, close, arg2 open, close), got 2"),
        ("reader_options.entity_types", "must be a list of non-empty strings"),
    ]
    assert check_schema_options({"schema": "bigbio_text", "unit": "passage"}) == [
        ("reader_options.unit", "applies to schema bigbio_kb only")]


# The round trip: raw reader → bigbio_kb records (the writers below) → examples_from_schema. Both sides are
# compared before label_map (the raw reader's own output), so raw labels and tags meet exactly.

def _conll_to_kb(examples: list[Example], per_document: int = 10) -> list[dict[str, Any]]:
    """Sentences as passages (words joined by single spaces), `per_document` to a document, entities from
    the IOB2 tags with document offsets."""
    records = []
    for d in range(0, len(examples), per_document):
        passages: list[dict[str, Any]] = []
        entities: list[dict[str, Any]] = []
        at = 0
        for ex in examples[d:d + per_document]:
            words, tags = ex.tokens or [], list(ex.label or [])
            text = " ".join(words)
            passages.append({"id": ex.uid, "type": "sentence", "text": [text], "offsets": [[at, at + len(text)]]})
            for k, (word, tag) in enumerate(zip(words, tags)):
                if tag.startswith("B-") or (tag.startswith("I-") and (k == 0 or tags[k - 1] == "O")):
                    entities.append({"id": f"T{len(entities)}", "type": tag[2:], "offsets": [[at, at]], "text": [""],
                                     "normalized": []})
                if tag != "O":  # the words of one entity are joined by single spaces, as in the passage
                    entities[-1]["offsets"][0][1] = at + len(word)
                    entities[-1]["text"][0] = f"{entities[-1]['text'][0]} {word}".lstrip()
                at += len(word) + 1
        records.append({"id": f"doc{d}", "document_id": f"doc{d}", "passages": passages, "entities": entities,
                        "events": [], "coreferences": [], "relations": []})
    return records


def _chemprot_to_kb(examples: list[Example]) -> list[dict[str, Any]]:
    """Consecutive relations over the same unmarked text form one document: one passage, two entities and one
    relation (the raw label) each."""
    records: list[dict[str, Any]] = []
    for ex in examples:
        first, second = FIRST.search(ex.text or ""), SECOND.search(ex.text or "")
        assert first and second
        cuts = sorted([first.start(), first.end() - 3, second.start(), second.end() - 3])
        text = "".join(ex.text[a + 3:b] for a, b in zip([-3] + cuts, cuts + [len(ex.text)]))  # type: ignore[index]

        def unmarked(position: int) -> int:
            return position - 3 * sum(c < position for c in cuts)

        if not records or records[-1]["passages"][0]["text"] != [text]:
            records.append({"id": f"doc{len(records)}", "document_id": f"doc{len(records)}", "events": [],
                            "coreferences": [], "entities": [], "relations": [],
                            "passages": [{"id": "p", "type": "abstract", "text": [text], "offsets": [[0, len(text)]]}]})
        record = records[-1]
        ids = []
        for match in (first, second):
            ids.append(f"T{len(record['entities'])}")
            span = [unmarked(match.start(1)), unmarked(match.end(1))]
            record["entities"].append({"id": ids[-1], "type": "entity", "text": [text[span[0]:span[1]]],
                                       "offsets": [span], "normalized": []})
        record["relations"].append({"id": f"R{len(record['relations'])}", "type": ex.label, "arg1_id": ids[0],
                                    "arg2_id": ids[1], "normalized": []})
    return records


def _fields(ex: Example) -> tuple[Any, ...]:
    return ex.tokens, ex.label, ex.text, ex.text_b, ex.meta


@pytest.mark.parametrize("name, writer", [("bc5cdr-chem", _conll_to_kb), ("chemprot", _chemprot_to_kb)])
def test_raw_reader_and_bigbio_kb_give_the_same_examples(name: str, writer: Any, data_dir: Path) -> None:
    raw = load_task_def(REPO / "task_defs" / f"{name}.yml")
    bigbio = raw.model_copy(update={"format": "hf", "reader_options": {"schema": "bigbio_kb",
                                                                        "word_split": "whitespace"}})
    for split in raw.has_splits:
        (path,) = split_paths(raw, split, data_dir)
        if not path.exists():
            pytest.skip(f"{path} absent")
        expected = list(READERS.get(raw.format)(path, raw))
        got = list(examples_from_schema(writer(expected), "bigbio_kb", bigbio, f"{name}:{split}"))
        assert len(got) == len(expected) > 0
        for want, have in zip(expected, got):
            assert _fields(have) == _fields(want), want.origin


def test_bigbio_kb_through_format_hf_matches_read_split(data_dir: Path, tmp_path: Path) -> None:
    """The dev splits as bigbio_kb JSON lines, read by `format: hf` + `read_split` (label_map applied)."""
    for name, writer in (("bc5cdr-chem", _conll_to_kb), ("chemprot", _chemprot_to_kb)):
        raw = load_task_def(REPO / "task_defs" / f"{name}.yml")
        if not all(p.exists() for p in split_paths(raw, "dev", data_dir)):
            pytest.skip(f"{name} dev data absent")
        (path,) = split_paths(raw, "dev", data_dir)
        rows = tmp_path / f"{name}.jsonl"
        rows.write_text("".join(json.dumps(r) + "\n" for r in writer(list(READERS.get(raw.format)(path, raw)))))
        bigbio = raw.model_copy(update={"format": "hf", "files": {"dev": str(rows)},
                                        "reader_options": {"schema": "bigbio_kb", "word_split": "whitespace"}})
        expected, got = read_split(raw, "dev", data_dir), read_split(bigbio, "dev", tmp_path)
        assert len(got) == len(expected) > 0
        assert [_fields(ex) for ex in got] == [_fields(ex) for ex in expected]
