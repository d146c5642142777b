"""A user adds datasets in TSV, CSV, JSONL and CoNLL with YAML files only (tests/fixtures/user_dataset)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mtbio.data.loading import read_split
from mtbio.data.readers import is_pair_task
from mtbio.tasks.loading import load_catalog


@pytest.fixture()
def user(fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch):
    root = fixtures_dir / "user_dataset"
    monkeypatch.setenv("MTBIO_TASK_DEFS", str(root / "defs"))
    return load_catalog(), root / "data"


def test_tsv_single_text_classification(user):
    catalog, data = user
    task = catalog.get("smoking-status")
    train = read_split(task, "train", data)
    assert [(e.uid, e.text, e.label) for e in train][:2] == [("1", "Patient smokes a pack a day.", "yes"),
                                                             ("2", "Never smoked.", "no")]
    assert not is_pair_task(task) and len(read_split(task, "test", data)) == 2


def test_csv_pair_classification_with_derived_split(user):
    catalog, data = user
    task = catalog.get("question-paraphrase")
    assert is_pair_task(task)
    examples = [e for s in ("train", "dev", "test") for e in read_split(task, s, data)]
    assert len(examples) == 4
    first = next(e for e in examples if e.label == "yes" and "ibuprofen" in e.text)
    assert first.text_b == "Is it safe to combine ibuprofen and lisinopril?"
    assert {e.text for e in examples} == {"Can I take ibuprofen with lisinopril?", "Why does my knee hurt, after running?"}


def test_jsonl_pair_regression(user):
    catalog, data = user
    train = read_split(catalog.get("note-similarity"), "train", data)
    assert [(e.uid, e.label) for e in train] == [("s1", 3.5), ("s2", 0.5), ("s3", 4.8)]
    assert train[2].text_b == "Clear lungs bilaterally."


def test_conll_tagging(user):
    catalog, data = user
    task = catalog.get("medications")
    assert task.label_list == ["O", "B-Drug", "I-Drug", "B-Dose", "I-Dose"]
    train = read_split(task, "train", data)
    assert train[0].tokens == ["Started", "metformin", "500", "mg", "."]
    assert train[0].label == ["O", "B-Drug", "B-Dose", "I-Dose", "O"]
    assert [e.group for e in train] == ["note1", "note1", "note2"]


def test_user_tasks_listed_by_the_cli(user, fixtures_dir):
    from click.testing import CliRunner

    from mtbio.cli import main

    catalog, data = user
    result = CliRunner().invoke(main, ["tasks", "list", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("medications"))
    assert line.split()[:8] == ["medications", "tagging", "other", "other", "5", "3", "-", "-"]
