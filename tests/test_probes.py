"""No-training baselines (issue 36, item 2): the embedding cosine and the linear probe against values
computed here independently, a case whose answer is known, and the command on real data."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from scipy.stats import pearsonr
from sklearn.linear_model import LinearRegression, LogisticRegression
from transformers import AutoModel, AutoTokenizer

from mtbio.cli import main
from mtbio.data.loading import read_split
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.model.probes import cosines, embed, embed_pooled, no_training_scores
from mtbio.tasks.loading import load_task_def

DEFS = SAMPLE_DIR / "task_defs"


def _mean_pooled(model: AutoModel, tokenizer: AutoTokenizer, texts: list[str], texts_b: list[str] | None = None
                 ) -> np.ndarray:
    out = []
    with torch.no_grad():
        for i, text in enumerate(texts):  # one at a time: no padding at all
            enc = tokenizer(text, texts_b[i] if texts_b else None, truncation=True, max_length=64, return_tensors="pt")
            out.append(model(**enc).last_hidden_state[0].double().mean(0).numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def tiny(tiny_encoder: str) -> tuple[AutoModel, AutoTokenizer]:
    return AutoModel.from_pretrained(tiny_encoder).eval(), AutoTokenizer.from_pretrained(tiny_encoder)


def test_the_cosine_baseline_of_a_similarity_task(tiny: tuple[AutoModel, AutoTokenizer]) -> None:
    model, tokenizer = tiny
    task = load_task_def(DEFS / "demo-sts.yml")
    train, dev = read_split(task, "train", SAMPLE_DIR), read_split(task, "dev", SAMPLE_DIR)
    scores = no_training_scores(task, model, tokenizer, train, dev, max_length=64)

    def cos(examples: list) -> np.ndarray:
        a = _mean_pooled(model, tokenizer, [e.text for e in examples])
        b = _mean_pooled(model, tokenizer, [e.text_b for e in examples])
        return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    fit = LinearRegression().fit(cos(train)[:, None], [e.label for e in train])
    expected = pearsonr(fit.predict(cos(dev)[:, None]), [e.label for e in dev])[0]
    assert scores["cosine-mean"]["pearson"] == pytest.approx(expected, abs=1e-6)
    assert set(scores) == {"cosine-mean", "cosine-cls", "probe"}


def test_the_linear_probe_of_a_pair_classification_task(tiny: tuple[AutoModel, AutoTokenizer]) -> None:
    model, tokenizer = tiny
    task = load_task_def(DEFS / "demo-nli.yml")
    train, dev = read_split(task, "train", SAMPLE_DIR), read_split(task, "dev", SAMPLE_DIR)
    scores = no_training_scores(task, model, tokenizer, train, dev, max_length=64)
    x_train = _mean_pooled(model, tokenizer, [e.text for e in train], [e.text_b for e in train])
    x_dev = _mean_pooled(model, tokenizer, [e.text for e in dev], [e.text_b for e in dev])
    predicted = LogisticRegression(max_iter=2000).fit(x_train, [e.label for e in train]).predict(x_dev)
    expected = float(np.mean([p == e.label for p, e in zip(predicted, dev)]))
    # the features agree to float32 noise (batched with padding vs one at a time); that noise may move
    # an example that sits on the fitted boundary, so the accuracies agree to one example
    features = embed(model, tokenizer, [e.text for e in dev], [e.text_b for e in dev], max_length=64)
    assert np.abs(features - x_dev).max() < 1e-6
    assert task.metric == "accuracy" and abs(scores["probe"]["accuracy"] - expected) <= 1 / len(dev) + 1e-12


def test_one_pass_gives_each_pooling_in_the_texts_order(tiny: tuple[AutoModel, AutoTokenizer]) -> None:
    """Texts go through the encoder sorted by length; each row still belongs to its text, for both poolings."""
    model, tokenizer = tiny
    texts = ["a much longer sentence about aspirin and a rash on the arm", "knee pain", "fever and a cough today",
             "ok", "insulin was started yesterday evening"]
    pooled = embed_pooled(model, tokenizer, texts, max_length=64, batch_size=2)
    with torch.no_grad():
        alone = [model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].double() for text in texts]
    assert np.abs(pooled["mean"] - np.stack([h.mean(0).numpy() for h in alone])).max() < 1e-6
    assert np.abs(pooled["cls"] - np.stack([h[0].numpy() for h in alone])).max() < 1e-6


def test_a_similarity_the_cosine_explains_exactly_scores_one(tiny: tuple[AutoModel, AutoTokenizer]) -> None:
    from mtbio.data.example import Example

    model, tokenizer = tiny
    task = load_task_def(DEFS / "demo-sts.yml")
    pairs = [("aspirin causes rash", "rash after aspirin"), ("no finding", "heparin given"),
             ("fever and cough", "cough with fever"), ("insulin started", "statin stopped"),
             ("pain in the knee", "knee pain"), ("edema noted", "nausea today")]
    unlabelled = [Example(str(i), None, text=a, text_b=b) for i, (a, b) in enumerate(pairs)]
    truth = cosines(model, tokenizer, unlabelled, 64)["mean"]
    examples = [Example(str(i), float(5 * c), text=a, text_b=b) for i, ((a, b), c) in enumerate(zip(pairs, truth))]
    scores = no_training_scores(task, model, tokenizer, examples, examples, max_length=64)
    assert scores["cosine-mean"]["pearson"] == pytest.approx(1.0, abs=1e-9)


def test_the_token_probe_of_a_tagging_task(tiny: tuple[AutoModel, AutoTokenizer]) -> None:
    """Each word's first sub-word vector, computed here one sentence at a time, into a logistic regression;
    its tags scored by entity F1 by hand."""
    from mtbio.evaluation.metrics import score_task

    task = load_task_def(DEFS / "demo-ner.yml")
    train, dev = read_split(task, "train", SAMPLE_DIR, 40), read_split(task, "dev", SAMPLE_DIR, 20)
    model, tokenizer = tiny

    def vectors(example):  # no batching, no padding
        enc = tokenizer(example.tokens, is_split_into_words=True, truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**enc).last_hidden_state[0].double().numpy()
        firsts = {}
        for position, word in enumerate(enc.word_ids(0)):
            if word is not None and word not in firsts:
                firsts[word] = position
        return hidden[[firsts[w] for w in sorted(firsts)]], len(firsts)

    fitted = [vectors(ex) for ex in train]
    x = np.concatenate([v for v, _ in fitted])
    y = [tag for ex, (_, n) in zip(train, fitted) for tag in ex.label[:n]]
    probe = LogisticRegression(max_iter=1000).fit(x, y)
    tags = []
    for ex in dev:
        v, n = vectors(ex)
        tags.append([str(t) for t in probe.predict(v)] + ["O"] * (len(ex.tokens) - n))
    expected = score_task(task, [ex.label for ex in dev], tags, [ex.group for ex in dev])
    scores = no_training_scores(task, model, tokenizer, train, dev, max_length=64)
    assert set(scores) == {"probe"}
    assert scores["probe"]["entity_f1"] == pytest.approx(expected["entity_f1"], abs=1e-9)
    assert expected["entity_f1"] > 0.05  # some entities found, even from a tiny random encoder's vectors


def test_the_command_on_real_pairs(data_dir: Path, tiny_encoder: str, tmp_path: Path) -> None:
    out = tmp_path / "baselines.json"
    done = CliRunner().invoke(main, ["tasks", "baselines", "--tasks", "mqp", "--data-dir", str(data_dir), "--encoder",
                                     tiny_encoder, "--max-train-examples", "60", "--output", str(out)])
    assert done.exit_code == 0, done.output[-2000:]
    [row] = json.loads(out.read_text())["rows"]
    assert row["task"] == "mqp" and row["train_examples"] == 60 and row["trivial"] == pytest.approx(0.5, abs=0.05)
    assert all(0.0 <= row[k] <= 1.0 for k in ("cosine-mean", "cosine-cls", "probe"))
    assert "cosine-mean" in done.stdout and "mqp" in done.stdout


def test_the_command_scores_a_fixed_subset_when_asked(data_dir: Path, tiny_encoder: str, tmp_path: Path) -> None:
    out = tmp_path / "baselines.json"
    done = CliRunner().invoke(main, ["tasks", "baselines", "--tasks", "mqp", "--data-dir", str(data_dir), "--encoder",
                                     tiny_encoder, "--max-train-examples", "40", "--max-eval-examples", "30",
                                     "--output", str(out)])
    assert done.exit_code == 0, done.output[-2000:]
    table = json.loads(out.read_text())
    assert table["max_eval_examples"] == 30 and table["rows"][0]["scored_examples"] == 30
    assert "a fixed subset of at most 30 examples per task" in done.stdout


def test_a_kind_without_a_probe_gets_no_baseline(monkeypatch) -> None:
    """A kind that names no probe (a label shape no linear model here predicts, a span say) gets no probe score,
    instead of a classifier that guesses its labels are classes."""
    from mtbio.experiments.demo import SAMPLE_DIR
    from mtbio.model.probes import no_training_scores
    from mtbio.tasks.loading import load_task_def

    task = load_task_def(SAMPLE_DIR / "task_defs" / "demo-nli.yml")
    monkeypatch.setattr(type(task.kind), "probe", None)
    assert no_training_scores(task, None, None, [], []) == {}
