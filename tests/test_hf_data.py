"""Data from the `datasets` ecosystem (issue 35): `format: hf` tasks from local parquet, a saved
dataset's splits, a derived split; one-line errors naming dataset, split and row; features cached
on the data; a `DatasetDict` in memory trained from Python."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import yaml
from click.testing import CliRunner

import mtbio
from mtbio.cli import main
from mtbio.data.loading import read_split
from mtbio.errors import DataFormatError, MtbioError
from mtbio.tasks.loading import load_task_def

REPO = Path(__file__).resolve().parents[1]
DDI_LABELS = ["DDI-false", "DDI-effect", "DDI-mechanism", "DDI-advise", "DDI-int"]


def _readme_hf_yaml() -> dict:
    """The `format: hf` example definition of docs/task_definitions.md (this test trains exactly that)."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "task_definitions.md").read_text(), re.S)
    [block] = [b for b in blocks if "format: hf" in b]
    return yaml.safe_load(re.sub(r"^   ", "", block, flags=re.M))


@pytest.fixture(scope="module")
def ddi_parquet(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DDI's first 300 training and 120 dev pairs as parquet, with the label as a ClassLabel."""
    ddi = load_task_def(REPO / "task_defs" / "ddi.yml")
    root = tmp_path_factory.mktemp("hf-data")
    features = datasets.Features({"pair_id": datasets.Value("string"), "sentence": datasets.Value("string"),
                                  "interaction": datasets.ClassLabel(names=DDI_LABELS)})
    (root / "ddi-parquet").mkdir()
    for split, n in (("train", 300), ("dev", 120)):
        examples = read_split(ddi, split, data_dir)[:n]
        datasets.Dataset.from_dict({"pair_id": [e.uid for e in examples], "sentence": [e.text for e in examples],
                                    "interaction": [DDI_LABELS.index(e.label) for e in examples]},
                                   features=features).to_parquet(str(root / "ddi-parquet" / f"{split}.parquet"))
    (root / "defs").mkdir()
    (root / "defs" / "ddi-parquet.yml").write_text(yaml.safe_dump(_readme_hf_yaml(), sort_keys=False))
    return root


def test_a_parquet_task_reads_the_same_examples_as_the_raw_files(ddi_parquet: Path, data_dir: Path) -> None:
    task = load_task_def(ddi_parquet / "defs" / "ddi-parquet.yml")
    raw = read_split(load_task_def(REPO / "task_defs" / "ddi.yml"), "train", data_dir)[:300]
    mine = read_split(task, "train", ddi_parquet)
    assert [(e.uid, e.text, e.label) for e in mine] == [(e.uid, e.text, e.label) for e in raw]
    assert mine[0].origin == f"{ddi_parquet / 'ddi-parquet' / 'train.parquet'}:1"


def test_a_parquet_task_trains_end_to_end_and_is_scored(ddi_parquet: Path, tiny_encoder: str, tmp_path: Path) -> None:
    run = tmp_path / "run"  # the commands run in this process (click's runner: no Python process importing torch)
    done = CliRunner().invoke(main, ["finetune", "--task", "ddi-parquet", "--task-defs", str(ddi_parquet / "defs"),
                                     "--data-dir", str(ddi_parquet), "--encoder", tiny_encoder, "--max-steps", "3",
                                     "--batch-size", "16", "--output", str(run)])
    assert done.exit_code == 0, done.output[-2000:]
    results = json.loads((run / "ddi-parquet" / "results.json").read_text())
    assert set(results["dev"]["ddi-parquet"]) >= {"micro_f1"}
    done = CliRunner().invoke(main, ["evaluate", str(run / "ddi-parquet"), "--data-dir", str(ddi_parquet)])
    assert done.exit_code == 0 and "ddi-parquet" in done.stdout, done.output[-2000:]


def test_a_saved_dataset_split_a_derived_split_and_tagging_columns(tmp_path: Path) -> None:
    tags = ["O", "B-Chemical", "I-Chemical"]
    features = datasets.Features({"words": datasets.Sequence(datasets.Value("string")),
                                  "ner": datasets.Sequence(datasets.ClassLabel(names=tags)),
                                  "doc": datasets.Value("string")})
    rows = {"words": [["Aspirin", "given", "."], ["No", "sodium", "chloride", "."]] * 10,
            "ner": [[1, 0, 0], [0, 1, 2, 0]] * 10, "doc": [f"d{i // 2}" for i in range(20)]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows, features=features)}).save_to_disk(
        str(tmp_path / "saved"))
    (tmp_path / "chem.yml").write_text(yaml.safe_dump({
        "name": "chem", "type": "tagging", "format": "hf", "reader_options": {"path": "saved"},
        "files": {"all": "hf:train"}, "derived_split": {"train": 0.6, "dev": 0.2, "test": 0.2},
        "columns": {"tokens": "words", "label": "ner", "group": "doc"}, "labels": tags,
        "tagging_scheme": "IOB2", "metric": "entity_f1"}))
    task = load_task_def(tmp_path / "chem.yml")
    splits = {s: read_split(task, s, tmp_path) for s in ("train", "dev", "test")}
    assert sum(len(v) for v in splits.values()) == 20
    every = [e for v in splits.values() for e in v]
    assert {tuple(e.tokens) for e in every} == {("Aspirin", "given", "."), ("No", "sodium", "chloride", ".")}
    assert all(e.label == (["B-Chemical", "O", "O"] if e.tokens[0] == "Aspirin" else ["O", "B-Chemical",
                                                                                     "I-Chemical", "O"])
               for e in every)
    docs = {s: {e.group for e in v} for s, v in splits.items()}
    assert not docs["train"] & docs["dev"] and not docs["train"] & docs["test"]  # a document stays in one split


def test_errors_name_the_dataset_split_and_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # as the CLI runs it (no waiting on a network)
    (tmp_path / "d").mkdir()
    datasets.Dataset.from_dict({"t": ["a", "b", "c"], "y": ["yes", "no", "maybe"]}).to_parquet(
        str(tmp_path / "d" / "train.parquet"))
    base = {"name": "yn", "type": "classification", "format": "hf", "files": {"train": "d/train.parquet"},
            "labels": ["yes", "no"], "metric": "accuracy"}
    (tmp_path / "yn.yml").write_text(yaml.safe_dump({**base, "columns": {"text": "t", "label": "y"}}))
    with pytest.raises(DataFormatError, match=r"d/train.parquet:3: label 'maybe' is not among the labels"):
        read_split(load_task_def(tmp_path / "yn.yml"), "train", tmp_path)
    (tmp_path / "yn.yml").write_text(yaml.safe_dump({**base, "columns": {"text": "text", "label": "y"}}))
    with pytest.raises(DataFormatError, match=r"train.parquet: no field\(s\) text \(fields: t, y\)"):
        read_split(load_task_def(tmp_path / "yn.yml"), "train", tmp_path)
    (tmp_path / "yn.yml").write_text(yaml.safe_dump({**base, "columns": {"label": "y"}}))
    with pytest.raises(MtbioError, match="format 'hf' needs column 'text'"):
        load_task_def(tmp_path / "yn.yml")
    hub = {**base, "columns": {"text": "t", "label": "y"}, "files": {"train": "hf:train"},
           "reader_options": {"path": "someone/not-cached"}}
    (tmp_path / "hub.yml").write_text(yaml.safe_dump(hub))
    with pytest.raises(MtbioError, match="dataset 'someone/not-cached' split 'train' could not be loaded: .*"
                                         "set HF_DATASETS_OFFLINE=0 to download it"):
        read_split(load_task_def(tmp_path / "hub.yml"), "train", tmp_path)


def test_features_of_a_dataset_split_are_cached_on_its_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 tiny_encoder: str) -> None:
    from mtbio.data.pipeline import load_task_split
    from mtbio.model.encoder import load_tokenizer

    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    features = datasets.Features({"t": datasets.Value("string"), "y": datasets.ClassLabel(names=["no", "yes"])})

    def save(labels: list[int]) -> None:
        datasets.DatasetDict({"train": datasets.Dataset.from_dict({"t": ["a b", "c d"], "y": labels},
                                                                 features=features)}).save_to_disk(str(tmp_path / "s"))

    (tmp_path / "t.yml").write_text(yaml.safe_dump({
        "name": "t", "type": "classification", "format": "hf", "reader_options": {"path": "s"},
        "files": {"train": "hf:train"}, "columns": {"text": "t", "label": "y"}, "labels": ["no", "yes"],
        "metric": "accuracy"}))
    task = load_task_def(tmp_path / "t.yml")
    tokenizer = load_tokenizer(tiny_encoder)
    save([0, 1])
    assert list(load_task_split(task, "train", tmp_path, tokenizer).columns["labels"]) == [0, 1]
    save([1, 1])
    assert list(load_task_split(task, "train", tmp_path, tokenizer).columns["labels"]) == [1, 1]


def test_a_dataset_dict_in_memory_trains_from_python(tmp_path: Path, tiny_encoder: str) -> None:
    """examples/own_data.py: the third way of docs/task_definitions.md, end to end."""
    env = dict(os.environ, MTBIO_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(REPO / "examples" / "own_data.py"), "--encoder", tiny_encoder,
                           "--max-steps", "2", "--output", str(tmp_path / "run")], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "smoking" / "results.json").read_text())
    assert "accuracy" in results["dev"]["smoking"]


def test_task_from_dataset_writes_a_definition_every_command_reads(tmp_path: Path) -> None:
    features = datasets.Features({"q": datasets.Value("string"), "a": datasets.Value("string"),
                                  "score": datasets.Value("float32")})
    part = datasets.Dataset.from_dict({"q": ["x", "y"], "a": ["u", "v"], "score": [0.5, 2.0]}, features=features)
    task = mtbio.task_from_dataset(datasets.DatasetDict({"train": part, "validation": part}), name="sim",
                                   type="regression", columns={"text": "q", "text_b": "a", "label": "score"},
                                   metric="pearson", directory=tmp_path / "sim", max_length=32)
    assert task.definition.files == {"train": "sim/train.parquet", "dev": "sim/dev.parquet"}
    assert task.definition.max_length == 32
    dev = read_split(task.definition, "dev", task.data_dir)
    assert [(e.text, e.text_b, e.label) for e in dev] == [("x", "u", 0.5), ("y", "v", 2.0)]
    with pytest.raises(MtbioError, match="not a ClassLabel; pass labels"):
        mtbio.task_from_dataset(part, name="c", type="classification", columns={"text": "q", "label": "a"},
                                metric="accuracy", directory=tmp_path / "c")
