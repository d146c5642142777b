"""Split sizes of every dataset present under the data directory equal the counts in its SOURCE.md.

The numbers are copied from /work/shared/data/<Dataset>/SOURCE.md (in the unit each task uses:
sentences for NER, rows/pairs otherwise; HoC rows are sentences). Skips without the real data.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest

from mtbio.data.example import Example
from mtbio.data.loading import read_split, split_sizes
from mtbio.tasks.loading import load_catalog

# task → (train, dev, test), from SOURCE.md
SOURCE_COUNTS = {
    "bc2gm": (12574, 2519, 5038),
    "bc5cdr-chem": (4560, 4581, 4797),
    "bc5cdr-disease": (4560, 4581, 4797),
    "ncbi-disease": (5424, 923, 940),
    "jnlpba": (16807, 1739, 3856),
    "bioasq": (670, 75, 140),
    "chemprot": (4169, 2427, 3469),
    "ddi": (25296, 2496, 5716),
    "hoc": (12119, 1798, 3547),
    "mediqa-rqe": (8588, 302, 230),
    "nli4ct": (1700, 200, 500),
}
# SOURCE.md: tokens and entity mentions (B- tags) per split
TOKENS_AND_MENTIONS = {
    "bc2gm": ((355405, 15197), (71042, 3061), (143465, 6325)),
    "bc5cdr-chem": ((118170, 5203), (117453, 5347), (124750, 5385)),
    "bc5cdr-disease": ((118170, 4182), (117453, 4246), (124750, 4424)),
    "ncbi-disease": ((135701, 5134), (23969, 787), (24497, 960)),
    "jnlpba": ((445090, 46750), (47461, 4551), (101039, 8662)),
}
SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@lru_cache(maxsize=None)
def _read(name: str, split: str, data_dir: str) -> tuple[Example, ...]:
    return tuple(read_split(load_catalog().get(name), split, Path(data_dir)))


def read(name: str, split: str, data_dir: Path) -> tuple[Example, ...]:
    return _read(name, split, str(data_dir))


@pytest.mark.parametrize("name", sorted(SOURCE_COUNTS))
def test_split_sizes_equal_source_counts(name, catalog, data_dir):
    assert split_sizes(catalog.get(name), data_dir) == dict(zip(SPLITS, SOURCE_COUNTS[name]))
    assert tuple(len(read(name, s, data_dir)) for s in SPLITS) == SOURCE_COUNTS[name]


@pytest.mark.parametrize("name", sorted(TOKENS_AND_MENTIONS))
def test_ner_tokens_and_mentions(name, data_dir):
    for split, (tokens, mentions) in zip(SPLITS, TOKENS_AND_MENTIONS[name]):
        examples = read(name, split, data_dir)
        assert sum(len(e.tokens) for e in examples) == tokens
        assert sum(tag.startswith("B") for e in examples for tag in e.label) == mentions


def test_jnlpba_documents(data_dir):
    # SOURCE.md counts 1,800 / 200 / 404 -DOCSTART- lines; three MEDLINE ids occur twice
    # (train 97218353, test 98281994 and 98282479), and group is the id, so one group each
    starts = [sum(1 for e in read("jnlpba", s, data_dir) if e.group is not None and _first_of_doc(e)) for s in SPLITS]
    assert [len({e.group for e in read("jnlpba", s, data_dir)}) for s in SPLITS] == [1799, 200, 402]
    assert starts == [1800, 200, 404]


def _first_of_doc(example: Example) -> bool:
    """Whether the line before the example's sentence (after a blank line) is a -DOCSTART- line."""
    path, line = example.origin.rsplit(":", 1)
    return int(line) - 2 in _docstart_lines(path)


@lru_cache(maxsize=None)
def _docstart_lines(path: str) -> frozenset[int]:
    with open(path, encoding="utf-8") as f:
        return frozenset(i for i, line in enumerate(f, start=1) if line.startswith("-DOCSTART-"))


def test_ebm_pico_dev_test_present_train_missing(catalog, data_dir):
    assert split_sizes(catalog.get("ebm-pico"), data_dir) == {"dev": 10386, "test": 2076}
    counts = {"dev": (960, 262268, 30280, 25061, 31967, 174960), "test": (191, 51784, 4711, 3563, 8090, 35420)}
    for split, (docs, tokens, par, int_, out, o) in counts.items():
        examples = read("ebm-pico", split, data_dir)
        tags = Counter(t for e in examples for t in e.label)
        assert len({e.group for e in examples}) == docs and sum(tags.values()) == tokens
        assert [tags["I-PAR"], tags["I-INT"], tags["I-OUT"], tags["O"]] == [par, int_, out, o]


def test_hoc_abstracts_and_labelled_sentences(data_dir):
    assert [len({e.group for e in read("hoc", s, data_dir)}) for s in SPLITS] == [1295, 186, 371]
    assert [sum(bool(e.label) for e in read("hoc", s, data_dir)) for s in SPLITS] == [3085, 461, 897]


def test_label_distributions(data_dir):
    ddi = Counter(e.label for e in read("ddi", "train", data_dir))
    assert ddi == {"DDI-false": 21745, "DDI-effect": 1486, "DDI-mechanism": 1163, "DDI-advise": 725, "DDI-int": 177}
    assert Counter(e.label for e in read("bioasq", "test", data_dir)) == {"yes": 94, "no": 46}
    assert Counter(e.label for e in read("mediqa-rqe", "train", data_dir)) == {"true": 4655, "false": 3933}
    assert Counter(e.meta["type"] for e in read("nli4ct", "test", data_dir)) == {"Single": 229, "Comparison": 271}
    # ChemProt: fine-grained counts (SOURCE.md) grouped into CPR classes
    assert Counter(e.label for e in read("chemprot", "train", data_dir)) == {
        "CPR:3": 323 + 67 + 387, "CPR:4": 131 + 1642 + 487, "CPR:5": 156 + 10 + 4, "CPR:6": 235, "CPR:9": 480 + 233 + 14}


def _derived(name: str, data_dir: Path) -> dict[str, tuple[Example, ...]]:
    return {s: read(name, s, data_dir) for s in SPLITS}


def _assert_document_disjoint(splits: dict[str, tuple[Example, ...]]) -> None:
    owner: dict[str, str] = {}
    for split, examples in splits.items():
        for e in examples:
            assert owner.setdefault(e.group, split) == split, f"{e.group} in {owner[e.group]} and {split}"


def test_ade_derived_split(data_dir):
    splits = _derived("ade", data_dir)
    labels = Counter(e.label for v in splits.values() for e in v)
    # SOURCE.md: 6,821 DRUG-AE rows over 4,271 unique sentences (one sentence occurs in two
    # PMIDs, so 4,272 distinct (PMID, sentence) examples) and 16,695 ADE-NEG lines
    assert labels == {"ADE": 4272, "noADE": 16695}
    assert len({e.group for e in splits["train"] + splits["dev"] + splits["test"] if e.label == "ADE"}) == 1644
    _assert_document_disjoint(splits)
    assert all(len(splits[s]) > 1000 for s in ("dev", "test"))


def test_mqp_derived_split(data_dir):
    splits = _derived("mqp", data_dir)
    assert sum(len(v) for v in splits.values()) == 3048
    assert Counter(e.label for v in splits.values() for e in v) == {"1": 1524, "0": 1524}
    _assert_document_disjoint(splits)


def test_chia_derived_split(data_dir):
    splits = _derived("chia", data_dir)
    _assert_document_disjoint(splits)
    assert len({e.group for v in splits.values() for e in v}) == 1000  # trials
    files = sorted((data_dir / "Chia" / "chia_without_scope").glob("*.txt"))
    assert len(files) == 2000
    lines = sum(1 for f in files for line in f.read_text(encoding="utf-8").split("\n") if line.strip())
    assert sum(len(v) for v in splits.values()) == lines
