"""A task's `sliding_window`: long texts read as overlapping windows. The windows cover the whole text, each word is
tagged from the first window that holds it, the model encodes each window as a text of its own and combines them
as declared, and a synthetic long document whose label is in its last sentence is learned with windows and not
without."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModel, AutoTokenizer

from mtbio.cli import main
from mtbio.data.collate import collate
from mtbio.data.example import Example
from mtbio.data.featurize import featurize
from mtbio.errors import MtbioError
from mtbio.model.encoder import default_encoder_path
from mtbio.model.windows import encode_windows, pool_windows
from mtbio.tasks.loading import load_task_def
from mtbio.tasks.schema import TaskDef


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(default_encoder_path())


def _task(**fields) -> TaskDef:
    base = dict(name="long", type="classification", format="jsonl", files={"train": "t.jsonl"}, labels=["a", "b"],
                max_length=16, sliding_window={"stride": 4})
    return TaskDef(**{**base, **fields})


def test_windows_cover_the_whole_text_and_a_batch_lays_them_out_at_its_longest(tokenizer) -> None:
    text = " ".join(f"term{i}" for i in range(30))
    rows = featurize([Example(uid="1", text=text, label="a"), Example(uid="2", text="short", label="b")], _task(),
                     tokenizer)
    long, short = rows[0], rows[1]
    assert not long["truncated"] and sum(long["segment_lengths"]) == len(long["input_ids"])
    ids, bounds = long["input_ids"], np.cumsum([0] + long["segment_lengths"])
    windows = [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    assert len(windows) > 2 and all(w[0] == tokenizer.cls_token_id for w in windows)
    assert all(len(w) == 16 for w in windows[:-1]) and len(windows[-1]) < 16  # the last window is the text's rest
    # the windows' tokens, each after the first without the `stride` tokens it repeats, are the text's
    real = [[t for t in w if t not in (tokenizer.cls_token_id, tokenizer.sep_token_id)] for w in windows]
    joined = real[0] + [t for w in real[1:] for t in w[4:]]
    assert joined == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert short["input_ids"] == tokenizer("short")["input_ids"]  # a text that fits is one window
    batch = collate([dict(long), dict(short)], pad_token_id=tokenizer.pad_token_id)
    assert int(batch["window"][0]) == 16 and batch["input_ids"].shape == (2, 16 * len(windows))
    assert batch["input_ids"][0, 16 * (len(windows) - 1):16 * (len(windows) - 1) + len(windows[-1])].tolist() == windows[-1]
    assert batch["input_ids"][1, :len(short["input_ids"])].tolist() == short["input_ids"]
    assert int(batch["attention_mask"][1].sum()) == len(short["input_ids"])
    alone = collate([dict(short)], pad_token_id=tokenizer.pad_token_id)  # a batch of short texts: slots as wide as they
    assert int(alone["window"][0]) == len(short["input_ids"]) == alone["input_ids"].shape[1]
    cut = featurize([Example(uid="1", text=text, label="a")], _task(sliding_window={"stride": 4, "max_windows": 2}),
                    tokenizer)[0]
    assert cut["truncated"] and len(cut["segment_lengths"]) == 2 and len(cut["input_ids"]) <= 32


def test_each_word_is_tagged_once_from_the_first_window_that_holds_its_first_sub_word(tokenizer) -> None:
    task = _task(type="tagging", format="conll", labels=["X"], tagging_scheme="IOB2", max_length=12,
                 sliding_window={"stride": 3})
    words, tags = [f"w{i}" for i in range(15)], ["O", "B-X", "I-X"] * 5
    row = featurize([Example(uid="1", tokens=words, label=tags)], task, tokenizer)[0]
    index, labels = row["word_index"], row["labels"]
    firsts = [i for i, w in enumerate(index) if w >= 0]
    assert [index[i] for i in firsts] == list(range(15))  # every word once, in order
    assert [labels[i] for i in firsts] == [task.label_list.index(t) for t in tags]
    assert all(labels[i] == -100 for i in range(len(index)) if index[i] < 0)
    windows = tokenizer(words, is_split_into_words=True, truncation=True, max_length=12, stride=3,
                        return_overflowing_tokens=True)
    first_window = {}
    for n in range(len(windows["input_ids"])):
        for word in windows.word_ids(n):
            if word is not None:
                first_window.setdefault(word, n)
    starts = np.cumsum(row["segment_lengths"])
    assert [int(np.searchsorted(starts, i, side="right")) for i in firsts] == [first_window[w] for w in range(15)]
    assert len(set(first_window.values())) > 2  # the sentence needed several windows


def test_windows_are_encoded_each_on_its_own_and_pooled_as_declared(tiny_encoder: str) -> None:
    encoder = AutoModel.from_pretrained(tiny_encoder).eval()
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (2, 20))
    mask = torch.ones_like(ids)
    mask[1, 13:] = 0  # the second row: one window and a part
    with torch.no_grad():
        hidden = encode_windows(encoder, {"input_ids": ids, "attention_mask": mask}, 8).last_hidden_state
        assert hidden.shape == (2, 20, 32)
        for start in (0, 8, 16):
            for row in (0, 1):
                part = slice(start, min(start + 8, 20))
                if not mask[row, part].any():
                    assert hidden[row, part].abs().max() == 0  # an all-padding window is not encoded
                    continue
                alone = encoder(input_ids=ids[row:row + 1, part], attention_mask=mask[row:row + 1, part])
                keep = mask[row, part].bool()
                torch.testing.assert_close(hidden[row, part][keep], alone.last_hidden_state[0][keep],
                                           atol=1e-6, rtol=1e-5)
    windows = [hidden[1, 0:8], hidden[1, 8:13]]  # the second row's real windows
    means = torch.stack([w.mean(0) for w in windows])
    torch.testing.assert_close(pool_windows(hidden, mask, "mean", 8, "mean")[1], means.mean(0))
    torch.testing.assert_close(pool_windows(hidden, mask, "mean", 8, "max")[1], means.max(0).values)
    torch.testing.assert_close(pool_windows(hidden, mask, "cls", 8, "mean")[1], (hidden[1, 0] + hidden[1, 8]) / 2)


def test_definitions_that_cannot_read_windows_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sliding_window: a entity_relation head reads positions"):
        _task(type="entity_relation", labels=["a", "b"], type_options={"markers": ["<<", "[["]})
    with pytest.raises(ValueError, match="sliding_window: pooling: pooler"):
        _task(pooling="pooler")
    with pytest.raises(ValueError, match="sliding_window.stride: 8 repeats half a window"):
        _task(sliding_window={"stride": 8})
    (tmp_path / "pairs.yml").write_text(
        "name: pairs\ntype: classification\nformat: jsonl\ncolumns: {text: a, text_b: b, label: y}\n"
        "files: {train: t.jsonl}\nlabels: [x, y]\nsliding_window: {stride: 4}\n")
    with pytest.raises(MtbioError, match="field 'sliding_window': windows cut single texts, and this task's examples are text pairs"):
        load_task_def(tmp_path / "pairs.yml")


FILLER = ["The patient was seen in the clinic today and the history was reviewed with the family.",
          "Vital signs were stable on arrival and the examination was otherwise unremarkable.",
          "Medications were reconciled and the plan was discussed with the nursing staff.",
          "Laboratory results from the previous admission were compared with the current values."]
ENDINGS = {"cardiac": "Final impression: heart failure with reduced ejection fraction.",
           "renal": "Final impression: acute kidney injury after contrast exposure."}


def _long_notes(path: Path, seed: int, pairs: int) -> None:
    """Pairs of notes of 8 filler sentences (~130 tokens), the same in both notes of a pair, whose label is only in
    the last sentence: cut at 64 tokens, a pair's notes are the same text."""
    rng = random.Random(seed)
    with path.open("w") as out:
        for i in range(pairs):
            filler = " ".join(rng.choice(FILLER) for _ in range(8))
            for label, ending in ENDINGS.items():
                out.write(json.dumps({"id": f"{label}{i}", "text": f"{filler} {ending}", "label": label}) + "\n")


@pytest.mark.parametrize("window", [True, False], ids=["windows", "truncated"])
def test_a_label_at_the_end_of_a_long_note_is_learned_with_windows_only(tmp_path: Path, window: bool) -> None:
    from mtbio.experiments.finetune import finetune
    from mtbio.training.config import RunConfig

    _long_notes(tmp_path / "train.jsonl", 1, 12)
    _long_notes(tmp_path / "dev.jsonl", 2, 6)
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "long-notes.yml").write_text(
        "name: long-notes\ntype: classification\nformat: jsonl\ncolumns: {id: id, text: text, label: label}\n"
        "files: {train: train.jsonl, dev: dev.jsonl}\nlabels: [cardiac, renal]\nmax_length: 64\n"
        + ("sliding_window: {stride: 16, aggregate: max}\n" if window else ""))
    config = RunConfig(tasks=["long-notes"], task_defs=[str(tmp_path / "defs")], data_dir=str(tmp_path),
                       output=str(tmp_path / "run"), mixed_precision="no", seed=1, max_steps=2, batch_size=8)
    [(run_dir, _)] = finetune(config)
    results = json.loads((run_dir / "results.json").read_text())
    dev, probe = results["dev"]["long-notes"]["accuracy"], results["baselines"]["long-notes"]["probe"]
    if window:
        assert dev == probe == 1.0
        note = " ".join(FILLER * 2) + " " + ENDINGS["renal"]
        (tmp_path / "in.txt").write_text(note + "\n")
        done = CliRunner().invoke(main, ["predict", str(run_dir), "--task", "long-notes", "--input",
                                         str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl")])
        assert done.exit_code == 0, done.output[-2000:]
        assert json.loads((tmp_path / "out.jsonl").read_text())["prediction"] == "renal"
        from mtbio.experiments.export import export_task

        with pytest.raises(MtbioError, match="reads long texts in windows"):
            export_task(run_dir, "long-notes", tmp_path / "export")
    else:  # the two notes of a pair read the same: one of them is wrong
        assert dev == probe == 0.5


def test_a_tagging_run_reads_every_word_of_sentences_longer_than_a_window(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.finetune import finetune
    from mtbio.training.config import RunConfig

    samples = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"
    definition = (samples / "task_defs" / "demo-ner.yml").read_text().replace("name: demo-ner", "name: ner-windows")
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "ner-windows.yml").write_text(
        definition.replace("max_length: 64", "max_length: 12\nsliding_window: {stride: 4}"))
    config = RunConfig(tasks=["ner-windows"], task_defs=[str(tmp_path / "defs")], data_dir=str(samples),
                       encoder=tiny_encoder, output=str(tmp_path / "run"), mixed_precision="no", seed=1, max_steps=2,
                       max_train_examples=40, max_eval_examples=40, batch_size=8, lr=1e-3)
    [(run_dir, _)] = finetune(config)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["truncated"]["ner-windows"] == {"train": 0, "dev": 0} and results["packed_tasks"] == []
    words = "Aspirin was given to the patient with fever and then ibuprofen for the headache after surgery".split()
    (tmp_path / "in.txt").write_text(" ".join(words) + "\n")
    done = CliRunner().invoke(main, ["predict", str(run_dir), "--task", "ner-windows", "--input",
                                     str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl")])
    assert done.exit_code == 0, done.output[-2000:]
    assert len(json.loads((tmp_path / "out.jsonl").read_text())["prediction"]) == len(words)
