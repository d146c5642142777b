"""Readers on tiny fixtures (incl. the credentialed BLUE formats), malformed input, derived splits."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from mtbio.data.example import Example
from mtbio.data.loading import derived_split_of, read_split, split_sizes
from mtbio.data.readers import READERS
from mtbio.errors import DataFormatError, MissingDataError, MtbioError
from mtbio.tasks.loading import load_catalog
from mtbio.tasks.schema import DerivedSplit, TaskDef


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def fixture_data(fixtures_dir: Path) -> Path:
    return fixtures_dir / "data"


def make_task(**fields: Any) -> TaskDef:
    base: dict[str, Any] = {"name": "t", "type": "classification", "format": "tsv", "columns": {"text": 0, "label": 1},
                            "files": {"train": "train.tsv"}, "labels": ["a", "b"], "metric": "accuracy"}
    base.update(fields)
    return TaskDef(**base)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def read_train(task: TaskDef, tmp_path: Path) -> list[Example]:
    return read_split(task, "train", tmp_path)


# ---- credentialed BLUE formats (fixtures written in their standard formats) ----------------------


def test_mednli_jsonl(catalog, fixture_data):
    train = read_split(catalog.get("mednli"), "train", fixture_data)
    assert [e.label for e in train] == ["entailment", "contradiction", "neutral"]
    assert train[0].uid == "23eb94b8-66c7-11e7-a8dc-f45c89b91419"
    assert train[0].text.startswith("Labs were notable") and train[0].text_b == "Patient has elevated Cr"
    assert train[0].origin.endswith("mli_train_v1.jsonl:1")
    test = read_split(catalog.get("mednli"), "test", fixture_data)  # a blank line is not an example
    assert [e.uid for e in test] == ["test-1", "test-2"] and test[1].origin.endswith(":3")


def test_clinicalsts_blue_tsv_with_csv_quoting(catalog, fixture_data):
    train = read_split(catalog.get("clinicalsts"), "train", fixture_data)
    assert [e.label for e in train] == [4.5, 1.0]
    assert train[1].text == 'Take 1 tablet by mouth "as needed" for pain.'
    assert train[1].text_b == "Ibuprofen 200 mg tablet."


def test_i2b2_blue_tsv_repeated_index_gets_unique_uids(catalog, fixture_data):
    train = read_split(catalog.get("i2b2-2010"), "train", fixture_data)
    assert [e.label for e in train] == ["TrAP", "false", "TeRP", "TeCP"]
    assert [e.uid for e in train][2:] == ["0001.l4.l5", "0001.l4.l5#2"]
    test = read_split(catalog.get("i2b2-2010"), "test", fixture_data)
    assert test[0].text == 'He reported "dizziness" after @treatment$ , consistent with @problem$ .'


def test_shareclefe_blue_conll_with_report_groups(catalog, fixture_data):
    train = read_split(catalog.get("shareclefe"), "train", fixture_data)
    assert [e.tokens for e in train][1] == ["No", "edema", "."]
    assert train[0].label == ["O", "O", "O", "B", "I", "O"]
    assert [e.group for e in train] == ["00098-016139-DISCHARGE_SUMMARY"] * 2 + ["00174-002042-DISCHARGE_SUMMARY"]


# ---- public formats -------------------------------------------------------------------------------


def test_conll_plain_and_docstart(catalog, fixture_data):
    chem = read_split(catalog.get("bc5cdr-chem"), "train", fixture_data)
    assert chem[1].tokens == ["Acute", "renal", "failure", "followed", "."]
    assert chem[0].group is None and chem[0].origin.endswith("train.tsv:1")
    jnl = read_split(catalog.get("jnlpba"), "train", fixture_data)
    assert [e.group for e in jnl] == ["95369245", "95333264"]
    pico = read_split(catalog.get("ebm-pico"), "dev", fixture_data)
    assert [e.group for e in pico] == ["10037531", "10037531"]  # parentheses removed, document continues
    assert pico[0].label == ["I-INT", "O", "I-OUT", "O", "I-PAR", "O"]


def test_conll_column_choice(tmp_path):
    write(tmp_path / "train.tsv", "a\tdoc1\t0\tB-X\nb\t-\t2\tO\n\nc\t-\t4\tB-X\n")
    task = make_task(type="tagging", format="conll", columns={"token": 0, "group": 1, "tag": 3}, labels=["X"],
                     tagging_scheme="IOB2", metric="entity_f1")
    examples = read_train(task, tmp_path)
    assert [e.tokens for e in examples] == [["a", "b"], ["c"]]
    assert [e.group for e in examples] == ["doc1", "doc1"]


def test_chemprot_label_map_and_markers(catalog, fixture_data, tmp_path):
    task = catalog.get("chemprot")
    train = read_split(task, "train", fixture_data)
    assert [e.label for e in train] == ["CPR:4", "CPR:3", "CPR:9"]
    assert train[0].text == "<< Aspirin >> irreversibly inhibits [[ COX-1 ]] ."
    assert train[0].meta == {"e1": "Aspirin", "e2": "COX-1"}
    stripped = task.model_copy(update={"entity_markers": "strip"})
    assert read_split(stripped, "train", fixture_data)[0].text == "Aspirin irreversibly inhibits COX-1 ."
    write(tmp_path / "c.txt", '{"text": "<< a >> and b", "label": "INHIBITOR"}\n')
    with pytest.raises(DataFormatError, match=r"c\.txt:1: expected one << >> and one \[\[ \]\]"):
        list(READERS.get("chemprot_jsonl")(tmp_path / "c.txt", task))


def test_ddi_and_bioasq_tsv(catalog, fixture_data):
    ddi = read_split(catalog.get("ddi"), "train", fixture_data)
    assert [e.uid for e in ddi][0] == "DDI-DrugBank.d1.s0.p0" and ddi[2].text == "@DRUG-DRUG$ was stopped."
    qa = read_split(catalog.get("bioasq"), "train", fixture_data)
    assert (qa[0].text, qa[0].label) == ("Is papilin secreted?", "yes") and qa[0].text_b.startswith("Papilin")


def test_gad_and_biosses_headers(catalog, fixture_data):
    gad = read_split(catalog.get("gad"), "train", fixture_data)
    assert [e.label for e in gad] == ["1", "0", "1"] and gad[0].uid == "0"
    sts = read_split(catalog.get("biosses"), "train", fixture_data)
    assert [e.label for e in sts] == [3.2, 0.2] and sts[0].text_b == "KRAS mutations often drive tumours."


def test_hoc_positive_hallmarks_and_pmid_groups(catalog, fixture_data):
    train = read_split(catalog.get("hoc"), "train", fixture_data)
    assert train[0].label == ["activating invasion and metastasis"]
    assert train[1].label == []
    assert train[2].label == ["inducing angiogenesis", "tumor promoting inflammation"]
    assert [e.group for e in train] == ["22239943", "22239943", "22239944"]
    assert train[2].uid == "22239944_s0"


def test_pubmedqa_ori_pqal_format(catalog, fixture_data):
    train = read_split(catalog.get("pubmedqa"), "train", fixture_data)
    assert [e.uid for e in train] == ["21645374", "16418930"]
    assert [e.label for e in train] == ["yes", "no"]
    assert train[0].text_b.startswith("Programmed cell death (PCD) is") and "mitochondrial dynamics" in train[0].text_b
    assert train[1].origin.endswith("train_set.json:16")  # the line of its PMID key


def test_nli4ct_premise_assembly(catalog, fixture_data):
    train = read_split(catalog.get("nli4ct"), "train", fixture_data)
    single, comparison = train
    assert single.text_b == "Primary trial: INCLUSION CRITERIA: Women aged 18 or older EXCLUSION CRITERIA: Pregnancy"
    assert comparison.text_b == ("Primary trial: INTERVENTION 1: Drug A 10 mg daily "
                                 "Secondary trial: INTERVENTION 1: Drug A 10 mg daily")
    assert comparison.meta == {"type": "Comparison", "section": "Intervention"}


def test_nli4ct_missing_report(tmp_path, catalog):
    write(tmp_path / "train.json", '{\n "x1": {"Type": "Single", "Section_id": "Results", "Primary_id": "NCT9",'
                                   ' "Statement": "s", "Label": "Entailment"}\n}\n')
    with pytest.raises(DataFormatError, match=r"train\.json:2: trial report .*NCT9\.json not found"):
        list(READERS.get("nli4ct")(tmp_path / "train.json", catalog.get("nli4ct")))


def test_mediqa_xml(catalog, fixture_data):
    train = read_split(catalog.get("mediqa-rqe"), "train", fixture_data)
    assert [(e.uid, e.label) for e in train] == [("1", "true"), ("2", "false")]
    assert train[0].text == "What dose of iron should a toddler with anemia take?"
    assert train[0].origin.endswith(":3")
    dev = read_split(catalog.get("mediqa-rqe"), "dev", fixture_data)
    assert dev[0].text == "Let's check her thyroid levels."


def test_mediqa_malformed_xml(tmp_path, catalog):
    write(tmp_path / "x.xml", '<root>\n<pair pid="1" value="true">\n<chq>a</chq>\n<faq>b</chq>\n</pair>\n</root>\n')
    with pytest.raises(DataFormatError, match=r"x\.xml:4: invalid XML"):
        list(READERS.get("mediqa_rqe_xml")(tmp_path / "x.xml", catalog.get("mediqa-rqe")))
    write(tmp_path / "y.xml", '<root>\n<pair pid="1">\n<chq>a</chq>\n<faq>b</faq>\n</pair>\n</root>\n')
    with pytest.raises(DataFormatError, match=r"y\.xml:2: <pair> without the 'value' attribute"):
        list(READERS.get("mediqa_rqe_xml")(tmp_path / "y.xml", catalog.get("mediqa-rqe")))


def test_ade_sentences_merge_relations(catalog, fixture_data):
    task = catalog.get("ade")
    examples = [e for s in ("train", "dev", "test") for e in read_split(task, s, fixture_data)]
    positives = [e for e in examples if e.label == "ADE"]
    assert len(positives) == 10 and len(examples) == 30  # 20 relation rows → 10 sentences, + 20 negatives
    assert positives[0].meta["pairs"] == "azithromycin → ototoxicity; azithromycin → hearing loss"
    assert all(e.group is not None and e.group.isdigit() for e in examples)


def test_brat_chia_tagging(catalog, fixture_data):
    task = catalog.get("chia")
    examples = read_split(task, "train", fixture_data) + read_split(task, "dev", fixture_data) \
        + read_split(task, "test", fixture_data)
    inc = next(e for e in examples if e.uid == "NCT00000000_inc:1")
    assert inc.tokens == ["Patients", "with", "type", "2", "diabetes"]
    assert inc.label == ["O", "O", "B-Condition", "I-Condition", "I-Condition"]
    hba1c = next(e for e in examples if e.uid == "NCT00000000_inc:2")
    assert hba1c.label[:2] == ["B-Measurement", "O"]  # Value is not a selected type
    exc = next(e for e in examples if e.uid == "NCT00000000_exc:1")  # CRLF text, offsets count the \r
    assert exc.label == ["O", "O", "B-Condition", "I-Condition", "O", "B-Condition"]
    drug = next(e for e in examples if e.uid == "NCT00000000_exc:2")
    assert drug.label[-1] == "B-Drug" and drug.group == "NCT00000000"


def test_brat_discontinuous_and_overlapping(tmp_path):
    text = "greater than normal 1 pain\n"
    write(tmp_path / "docs/N1_inc.txt", text)
    write(tmp_path / "docs/N1_inc.ann",
          "T1\tMeasurement 0 12;20 21\tgreater than 1\n"  # discontinuous: two runs
          "T2\tCondition 0 26\tgreater than normal 1 pain\n"  # longest: wins the overlap
          "T3\tCondition 22 26\tpain\n")  # inside T2: left out, counted
    task = make_task(type="tagging", format="brat", columns={}, files={"train": "docs"},
                     labels=["Condition", "Measurement"], tagging_scheme="IOB2", metric="entity_f1")
    (ex,) = read_train(task, tmp_path)
    assert ex.label == ["B-Condition"] + ["I-Condition"] * 4
    assert ex.meta["overlaps_left_out"] == "3"
    write(tmp_path / "docs/N1_inc.ann", "T1\tMeasurement 0 12;20 21\tgreater than 1\n")
    (ex,) = read_train(task, tmp_path)
    assert ex.label == ["B-Measurement", "I-Measurement", "O", "B-Measurement", "O"]
    write(tmp_path / "docs/N1_inc.ann", "T1\tCondition 22 99\tpain\n")
    with pytest.raises(DataFormatError, match=r"N1_inc\.ann:1: span 22-99 outside the text"):
        read_train(task, tmp_path)
    as_tags = task.model_copy(update={"labels": ["O", "B-Condition", "I-Condition"]})
    with pytest.raises(MtbioError, match="entity types \\(not tags\\) as labels"):
        read_train(as_tags, tmp_path)


# ---- malformed input: DataFormatError naming file and line ---------------------------------------


@pytest.mark.parametrize(
    "fields, content, line, message",
    [
        ({}, "a\ta\nb\n", 2, "expected 2 fields"),  # wrong column count
        ({}, "a\ta\n\nb\tb\tb\n", 3, "expected 2 fields"),
        ({}, "x\ta\ny\tc\n", 2, "label 'c' is not among the labels"),  # unknown label
        ({}, b"x\ta\ny\xff\ta\n", 2, "not valid UTF-8"),  # non-UTF-8 bytes
        ({"format": "jsonl", "columns": {"text": "t", "label": "l"}}, '{"t": "x", "l": "a"}\n{"t": "y", "l": \n', 2,
         "invalid JSON"),
        ({"format": "jsonl", "columns": {"text": "t", "label": "l"}}, '{"t": "x", "l": "a"}\n{"t": "y"}\n', 2,
         "missing field"),
        ({"type": "regression", "labels": None}, "x\t1.5\ny\thigh\n", 2, "must be a number"),
        ({"format": "csv"}, 'x,a\n"y,a\n', 2, "malformed quoted field|expected 2 fields"),
        ({"type": "tagging", "format": "conll", "columns": {}, "labels": ["X"], "tagging_scheme": "IOB2",
          "metric": "entity_f1"}, "a\tB-X\nb\n", 2, "expected 2 fields"),  # tag line with no tag
        ({"type": "tagging", "format": "conll", "columns": {}, "labels": ["X"], "tagging_scheme": "IOB2",
          "metric": "entity_f1"}, "a\tB-X\n\nb\tB-Y\n", 3, "tag 'B-Y' is not among the labels"),
        ({"type": "tagging", "format": "conll", "columns": {}, "labels": ["X"], "tagging_scheme": "IOB2",
          "metric": "entity_f1"}, "a\tB-X\n \tO\n", 2, "empty token"),
        ({"type": "multilabel", "format": "hoc", "columns": {}, "labels": ["h0", "h1"],
          "label_map": {"0": "h0", "1": "h1"}, "metric": "hoc_f1"},
         "labels\tsentence\tindex\n0_1,1_0\ts\t1_s0\n0_2,1_0\ts\t1_s1\n", 3, "bad label item '0_2'"),
        ({"format": "ade", "columns": {}, "labels": ["noADE", "ADE"]}, "1 NEG fine\nnot a negative line\n", 2, "expected 'PMID NEG sentence'"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, fields, content, line, message):
    task = make_task(**fields)
    write(tmp_path / "train.tsv", content)
    with pytest.raises(DataFormatError) as info:
        read_train(task, tmp_path)
    assert info.value.line == line
    assert info.value.path.endswith("train.tsv")
    assert re.search(message, info.value.message), info.value.message


def test_label_map_applies_before_checking(tmp_path):
    write(tmp_path / "train.tsv", "x\tA\ny\tb\n")
    assert [e.label for e in read_train(make_task(label_map={"A": "a"}), tmp_path)] == ["a", "b"]


def test_header_names_and_negative_positions(tmp_path):
    write(tmp_path / "train.tsv", "id\tsentence\tlabel\n7\thello\ta\n")
    task = make_task(columns={"id": "id", "text": "sentence", "label": -1}, reader_options={"header": True})
    (ex,) = read_train(task, tmp_path)
    assert (ex.uid, ex.text, ex.label, ex.origin.rsplit(":", 1)[1]) == ("7", "hello", "a", "2")
    bad = make_task(columns={"text": "sentence", "label": "gold"}, reader_options={"header": True})
    with pytest.raises(DataFormatError, match="no column named 'gold'"):
        read_train(bad, tmp_path)


def test_multilabel_tsv_label_separator(tmp_path):
    write(tmp_path / "train.tsv", "x\ta|b\ny\t\n")
    task = make_task(type="multilabel", reader_options={"label_separator": "|"}, metric="multilabel_micro_f1")
    assert [e.label for e in read_train(task, tmp_path)] == [["a", "b"], []]


# ---- read_split: missing splits, max_examples ------------------------------------------------------


def test_missing_split_is_reported_with_its_path(catalog, fixture_data):
    with pytest.raises(MissingDataError, match=r"ebm-pico.*train data missing.*EBM-NLP/train\.tsv"):
        read_split(catalog.get("ebm-pico"), "train", fixture_data)
    assert split_sizes(catalog.get("ebm-pico"), fixture_data) == {"dev": 2, "test": 1}
    with pytest.raises(MtbioError, match="has no 'dev' split"):
        read_split(make_task(), "dev", fixture_data)


def test_max_examples_is_a_nested_deterministic_subset(tmp_path):
    write(tmp_path / "train.tsv", "".join(f"text {i}\t{'ab'[i % 2]}\n" for i in range(50)))
    task = make_task()
    full = read_train(task, tmp_path)
    small, large = read_split(task, "train", tmp_path, 5), read_split(task, "train", tmp_path, 20)
    assert len(small) == 5 and len(large) == 20
    assert {e.uid for e in small} <= {e.uid for e in large}
    assert [e.uid for e in small] == [e.uid for e in read_split(task, "train", tmp_path, 5)]
    order = [e.uid for e in full]
    assert [order.index(e.uid) for e in large] == sorted(order.index(e.uid) for e in large)  # file order kept
    assert small != full[:5]  # a hash-ranked sample, not the prefix


# ---- derived splits -----------------------------------------------------------------------------------


def test_derived_split_is_stable_and_document_disjoint(tmp_path):
    rows = "".join(f"sentence {i} of doc {i // 3}\t{'ab'[i % 2]}\tdoc{i // 3}\n" for i in range(300))
    write(tmp_path / "all.tsv", rows)
    task = make_task(columns={"text": 0, "label": 1, "group": 2}, files={"all": "all.tsv"},
                     derived_split={"train": 0.6, "dev": 0.2, "test": 0.2, "seed": 5})
    splits = {s: read_split(task, s, tmp_path) for s in ("train", "dev", "test")}
    assert sum(len(v) for v in splits.values()) == 300
    groups = {s: {e.group for e in v} for s, v in splits.items()}
    assert not groups["train"] & groups["dev"] and not groups["train"] & groups["test"] and not groups["dev"] & groups["test"]
    assert all(len(v) > 10 for v in splits.values())
    again = {s: [e.uid for e in read_split(task, s, tmp_path)] for s in splits}
    assert again == {s: [e.uid for e in v] for s, v in splits.items()}
    # the assignment depends on the group only, not on file order
    write(tmp_path / "all.tsv", "".join(reversed(rows.splitlines(keepends=True))))
    assert {e.group for e in read_split(task, "dev", tmp_path)} == groups["dev"]
    # and a known value pins the hash rule (sha256 of "<seed>:<group>")
    assert derived_split_of(Example(uid="u", label="a", group="doc0"), DerivedSplit(seed=5, train=0.6, dev=0.2, test=0.2)) \
        == _expected_split("5:doc0", 0.6, 0.2)
    assert split_sizes(task, tmp_path) == {s: len(v) for s, v in splits.items()}


def _expected_split(key: str, train: float, dev: float) -> str:
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    return "train" if u < train else "dev" if u < train + dev else "test"


def test_mqp_fixture_keeps_question_pairs_together(catalog, fixture_data):
    task = catalog.get("mqp")
    seen: dict[str, str] = {}
    for split in ("train", "dev", "test"):
        for ex in read_split(task, split, fixture_data):
            assert seen.setdefault(ex.group, split) == split
    assert len(seen) == 12


def test_conll_docstart_without_id(tmp_path):
    write(tmp_path / "train.tsv", "-DOCSTART- -X- O O\n\na O\n\n-DOCSTART-\n\nb O\nc O\n")
    task = make_task(type="tagging", format="conll", columns={}, reader_options={"delimiter": " "}, labels=["X"],
                     tagging_scheme="IOB2", metric="entity_f1")
    assert [(e.tokens, e.group) for e in read_train(task, tmp_path)] == [(["a"], "train-doc1"), (["b", "c"], "train-doc2")]


def test_a_split_is_read_once_per_content_of_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second read of a split, its subsets and its size come from the cache (the files are not parsed again);
    a same-size edit with the old file time, a changed task definition or an unwritable cache reads the files."""
    from mtbio.data import loading

    parsed = []
    real = loading._read_files
    monkeypatch.setattr(loading, "_read_files", lambda task, paths: parsed.append(task.name) or real(task, paths))
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    data = write(tmp_path / "data" / "train.tsv", "".join(f"text {i}\t{'ab'[i % 2]}\n" for i in range(20)))
    task = make_task()
    first = read_split(task, "train", tmp_path / "data")
    assert read_split(task, "train", tmp_path / "data") == first and len(parsed) == 1
    subset = read_split(task, "train", tmp_path / "data", max_examples=5)
    assert read_split(task, "train", tmp_path / "data", max_examples=5) == subset and len(parsed) == 2
    assert [ex.uid for ex in subset] == [ex.uid for ex in loading._subset(first, 5)]
    assert split_sizes(task, tmp_path / "data") == split_sizes(task, tmp_path / "data") == {"train": 20}
    assert len(parsed) == 3

    stat = data.stat()
    data.write_text(data.read_text().replace("text 0\ta", "text 0\tb"))  # same size, then the old time
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert read_split(task, "train", tmp_path / "data")[0].label == "b" and len(parsed) == 4
    mapped = make_task(label_map={"a": "b"})
    assert {ex.label for ex in read_split(mapped, "train", tmp_path / "data")} == {"b"} and len(parsed) == 5

    monkeypatch.setenv("MTBIO_CACHE_DIR", str(data))  # a file: nothing can be cached, the reads still work
    assert read_split(task, "train", tmp_path / "data") == read_split(task, "train", tmp_path / "data")
    assert len(parsed) == 7
