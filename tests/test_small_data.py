"""The small-data recipe's pieces (issue 63) that are in place: sentence-level heads that read the mean of the
tokens, as the packaged sentence-transformers encoder embeds a text."""
from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.model.encoder import default_encoder_path
from mtbio.model.heads import pool

TEXTS = ["Aspirin reduced the risk of myocardial infarction.", "No interaction was seen.",
         "The patient denies chest pain but reports shortness of breath on exertion."]


def test_mean_pooling_is_sentence_transformers_embedding_of_the_packaged_encoder() -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from transformers import AutoModel, AutoTokenizer

    reference = sentence_transformers.SentenceTransformer(default_encoder_path(), device="cpu")
    assert [type(m).__name__ for m in reference][:2] == ["Transformer", "Pooling"]
    unnormalized = sentence_transformers.SentenceTransformer(modules=[reference[0], reference[1]], device="cpu")
    theirs = unnormalized.encode(TEXTS, convert_to_tensor=True, batch_size=len(TEXTS))
    tokenizer, encoder = AutoTokenizer.from_pretrained(default_encoder_path()), AutoModel.from_pretrained(default_encoder_path())
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")  # padded: the mask must drop the padding
    with torch.no_grad():
        ours = pool(encoder.eval()(**batch).last_hidden_state, batch["attention_mask"], "mean")
    assert ours.shape == theirs.shape and torch.allclose(ours, theirs.float(), atol=1e-5, rtol=0)
    assert not torch.allclose(ours, pool(encoder(**batch).last_hidden_state, batch["attention_mask"], "cls"), atol=1e-2)


def test_a_mean_pooled_head_trains_predicts_and_refuses_export_in_one_line(tmp_path: Path, tiny_encoder: str) -> None:
    defs = tmp_path / "defs"
    defs.mkdir()
    source = (SAMPLE_DIR / "task_defs" / "demo-nli.yml").read_text()
    (defs / "demo-nli.yml").write_text(source + "pooling: mean\n")
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(defs), "--data-dir",
                                       str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "3",
                                       "--batch-size", "8", "--max-train-examples", "32", "--output", str(run)])
    assert result.exit_code == 0, result.output
    head = json.loads((run / "demo-nli" / "heads" / "demo-nli" / "head_config.json").read_text())
    assert head["pooling"] == "mean"
    loaded = __import__("mtbio").load(run / "demo-nli")
    short = loaded.predict("demo-nli", [("A man sleeps.", "A man is awake.")])
    padded = loaded.predict("demo-nli", [("A man sleeps.", "A man is awake."), ("x " * 40, "y")])[:1]
    assert short == padded  # padding in the batch does not move a mean-pooled prediction
    result = CliRunner().invoke(main, ["export", str(run / "demo-nli"), "--task", "demo-nli", "--output",
                                       str(tmp_path / "out")])
    assert result.exit_code == 2 and "pooling: mean" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_the_step_floor_reaches_its_steps_on_a_50_example_set(tmp_path: Path, tiny_encoder: str) -> None:
    args = ["finetune", "--task", "demo-relation", "--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir",
            str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-train-examples", "50", "--batch-size", "16",
            "--epochs", "1", "--max-length", "48"]
    plain = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "plain")])
    floored = CliRunner().invoke(main, [*args, "--min-steps", "102", "--output", str(tmp_path / "floor")])
    assert plain.exit_code == 0 and floored.exit_code == 0, plain.output + floored.output
    steps = {name: json.loads((tmp_path / name / "demo-relation" / "results.json").read_text())["steps"]
             for name in ("plain", "floor")}
    assert steps == {"plain": 4, "floor": 102}  # ceil(50 / 16) = 4 a epoch; 102 = 25 epochs and 2 steps
    curve = [json.loads(line) for line in (tmp_path / "floor" / "demo-relation" / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r["step"] for r in curve if r.get("split") == "dev"]
    # 25 epoch ends, but an evaluation only once a tenth of the run (10 steps) has passed, and one at the end
    assert evaluated == [12, 24, 36, 48, 60, 72, 84, 96, 102]
    config = (tmp_path / "floor" / "demo-relation" / "config.yaml").read_text()
    assert "min_steps: 102" in config


def test_a_run_below_its_no_training_baselines_warns_lists_it_and_its_card_says_so(
        tmp_path: Path, tiny_encoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import mtbio.experiments.training_run as training_run
    from mtbio.model import floor

    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(training_run, "trivial_score", lambda *args: -1.0)  # judged on its baselines alone
    args = ["finetune", "--task", "demo-relation", "--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir",
            str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "2", "--batch-size", "8",
            "--max-train-examples", "40", "--max-length", "48"]
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "run" / "demo-relation" / "results.json").read_text())
    found = results["baselines"]["demo-relation"]
    assert set(found) == {"probe"} and 0 <= found["probe"] <= 1  # a single-text task: the probe alone
    dev = results["dev"]["demo-relation"]["micro_f1"]
    assert (results["below_floor"] == ["demo-relation"]) == (dev < found["probe"])
    # the same start, task and data again: the baselines come from the cache, the encoder is not loaded for them
    calls: list[int] = []
    real = floor.probes.no_training_scores
    monkeypatch.setattr(floor.probes, "no_training_scores", lambda *a, **k: calls.append(1) or real(*a, **k))
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "again")])
    assert result.exit_code == 0 and calls == []
    assert json.loads((tmp_path / "again" / "demo-relation" / "results.json").read_text())["baselines"] == \
        results["baselines"]
    # a floor the score cannot reach: the warning line, results.json and the card all say so
    monkeypatch.setattr(training_run, "no_training_baselines", lambda *a, **k: {"probe": 1.0})
    result = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "below")])
    assert result.exit_code == 0, result.output
    assert "demo-relation: below its floor: dev micro_f1" in result.output
    assert "a logistic regression on frozen features (probe 1.0000), the best of its trivial score" in result.output
    run = tmp_path / "below" / "demo-relation"
    saved = json.loads((run / "results.json").read_text())
    assert saved["below_floor"] == ["demo-relation"] and saved["floor"]["demo-relation"] == {"score": 1.0,
                                                                                             "source": "probe"}
    result = CliRunner().invoke(main, ["export", str(run), "--task", "demo-relation", "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "**Below its floor:** this run's dev score is below a logistic regression on frozen features" in \
        (tmp_path / "out" / "README.md").read_text()


def test_below_floor_follows_the_metrics_direction() -> None:
    from mtbio.model.floor import below_floor

    assert below_floor(0.5, {"probe": 0.6, "cosine-mean": 0.7}, "accuracy") == ("cosine-mean", 0.7)
    assert below_floor(0.8, {"probe": 0.6, "cosine-mean": 0.7}, "accuracy") is None
    assert below_floor(0.5, {}, "accuracy") is None
    assert below_floor(2.0, {"probe": 1.5}, "mse") == ("probe", 1.5)  # lower is better
    assert below_floor(1.0, {"probe": 1.5}, "mse") is None


def test_an_lp_ft_start_is_the_probe_fitted_on_the_frozen_encoder(tmp_path: Path, tiny_encoder: str) -> None:
    """With --lp-ft and a learning rate too small to move anything, the saved head is the logistic regression
    fitted on the frozen encoder's mean-pooled vectors of the training examples (what its probe reads, so the head
    reads them too), computed here on its own."""
    from safetensors.torch import load_file
    from sklearn.linear_model import LogisticRegression
    from transformers import AutoModel, AutoTokenizer

    from mtbio.data.pipeline import load_task_data
    from mtbio.tasks.loading import load_task_def

    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                       "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--lp-ft",
                                       "--lr", "1e-30", "--max-steps", "1", "--max-train-examples", "40",
                                       "--max-length", "48", "--output", str(run)])
    assert result.exit_code == 0, result.output
    results = json.loads((run / "demo-nli" / "results.json").read_text())
    assert results["lp_start"] == ["demo-nli"]
    head = load_file(str(run / "demo-nli" / "heads" / "demo-nli" / "model.safetensors"))

    task = load_task_def(SAMPLE_DIR / "task_defs" / "demo-nli.yml")
    tokenizer, encoder = AutoTokenizer.from_pretrained(tiny_encoder), AutoModel.from_pretrained(tiny_encoder).eval()
    examples = load_task_data(task, SAMPLE_DIR, tokenizer, ["train"], 40, 48).splits["train"].examples
    with torch.no_grad():
        x = torch.cat([encoder(**tokenizer(ex.text, ex.text_b, truncation=True, max_length=48,
                                           return_tensors="pt")).last_hidden_state.mean(1) for ex in examples])
    y = [task.label_list.index(str(ex.label)) for ex in examples]
    assert len(set(y)) == 3
    probe = LogisticRegression(max_iter=2000).fit(x.double().numpy(), y)
    assert torch.allclose(head["out.weight"].double(), torch.as_tensor(probe.coef_), atol=2e-3)
    assert torch.allclose(head["out.bias"].double(), torch.as_tensor(probe.intercept_), atol=2e-3)
    assert float((head["out.weight"].double() - torch.as_tensor(probe.coef_)).abs().max()) < \
        0.05 * float(torch.as_tensor(probe.coef_).abs().max())


@pytest.mark.parametrize("task", ["demo-ner", "demo-hoc", "demo-sts", "demo-relation"])
def test_lp_ft_fits_every_kind_with_one_linear_output(task: str, tiny_encoder: str) -> None:
    from transformers import AutoTokenizer

    from mtbio.data.pipeline import load_task_data
    from mtbio.experiments.training_run import head_config_for
    from mtbio.model.encoder import load_encoder
    from mtbio.model.heads import build_head
    from mtbio.model.multitask import MultiTaskModel
    from mtbio.tasks.loading import load_task_def
    from mtbio.training.lp_start import fit_heads, frozen_features

    definition = load_task_def(SAMPLE_DIR / "task_defs" / f"{task}.yml")
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder)
    split = load_task_data(definition, SAMPLE_DIR, tokenizer, ["train"], 40, 48).splits["train"]
    model = MultiTaskModel(load_encoder(tiny_encoder), {task: build_head(head_config_for(definition, 32))})
    x, y = frozen_features(model, task, split, tokenizer.pad_token_id)
    assert x.shape[0] == y.shape[0] and x.shape[1] == 32
    before = model.heads[task].out.weight.detach().clone()
    assert fit_heads(model, {task: definition}, {task: split}, tokenizer.pad_token_id, [task]) == {task: True}
    assert not torch.equal(before, model.heads[task].out.weight)


def test_pooling_auto_reads_the_encoders_sentence_transformers_config(tmp_path: Path, tiny_encoder: str) -> None:
    from mtbio.experiments.training_run import resolve_pooling
    from mtbio.model.encoder import sentence_pooling
    from mtbio.tasks.loading import load_task_def

    assert sentence_pooling(None) == "mean"  # the packaged MiniLM: Transformer + mean Pooling (+ Normalize)
    assert sentence_pooling(tiny_encoder) is None  # a plain transformers directory
    nli = load_task_def(SAMPLE_DIR / "task_defs" / "demo-nli.yml")
    ner = load_task_def(SAMPLE_DIR / "task_defs" / "demo-ner.yml")
    assert nli.pooling == "cls"
    assert resolve_pooling(nli, "auto", None, None).pooling == "mean"
    assert resolve_pooling(nli, "auto", tiny_encoder, None).pooling == "cls"  # none there: the task's own
    assert resolve_pooling(nli, "task", None, None) is nli
    assert resolve_pooling(ner, "mean", None, None) is ner  # tagging reads every token: pooling does not apply
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                       "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--pooling", "mean",
                                       "--max-steps", "1", "--max-train-examples", "16", "--output", str(run)])
    assert result.exit_code == 0, result.output
    assert "pooling: mean" in (run / "demo-nli" / "tasks" / "demo-nli.yml").read_text()
    assert "pooling: mean" in (run / "demo-nli" / "config.yaml").read_text()
    assert json.loads((run / "demo-nli" / "heads" / "demo-nli" / "head_config.json").read_text())["pooling"] == "mean"


def test_a_cosine_classifier_with_lp_ft_starts_at_the_zero_shot_cosine_baseline(tmp_path: Path,
                                                                                tiny_encoder: str) -> None:
    """cosine_classification: the two texts encoded on their own, their cosine one feature of a linear layer.
    With --lp-ft and a learning rate too small to move anything, its dev score is the `cosine-mean` no-training
    baseline's (the same logistic regression on the same cosines), to an example."""
    defs = tmp_path / "defs"
    defs.mkdir()
    source = (SAMPLE_DIR / "task_defs" / "demo-nli.yml").read_text()
    (defs / "demo-nli-bi.yml").write_text(source.replace("name: demo-nli", "name: demo-nli-bi")
                                          .replace("type: classification", "type: cosine_classification"))
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli-bi", "--task-defs", str(defs), "--data-dir",
                                       str(SAMPLE_DIR), "--encoder", tiny_encoder, "--lp-ft", "--lr", "1e-30",
                                       "--max-steps", "1", "--max-length", "48", "--output", str(run)])
    assert result.exit_code == 0, result.output
    results = json.loads((run / "demo-nli-bi" / "results.json").read_text())
    assert results["lp_start"] == ["demo-nli-bi"]
    dev, baseline = results["dev"]["demo-nli-bi"]["accuracy"], results["baselines"]["demo-nli-bi"]["cosine-mean"]
    assert abs(dev - baseline) <= 1 / results["eval_examples"]["demo-nli-bi"]["dev"] + 1e-9
    predicted = __import__("mtbio").load(run / "demo-nli-bi").predict("demo-nli-bi", [("A man sleeps.", "A man is awake.")])
    assert predicted[0] in ("entailment", "contradiction", "neutral")


def test_an_lp_ft_start_is_evaluated_and_kept_when_training_only_makes_it_worse(tmp_path: Path,
                                                                               tiny_encoder: str) -> None:
    """The fitted start (here the zero-shot cosine's logistic regression) is a dev-selection candidate at step 0: a
    run whose learning rate wrecks it keeps the start, not its last weights; without LP-FT step 0 is not evaluated."""
    defs = tmp_path / "defs"
    defs.mkdir()
    source = (SAMPLE_DIR / "task_defs" / "demo-nli.yml").read_text()
    (defs / "demo-nli-bi.yml").write_text(source.replace("name: demo-nli", "name: demo-nli-bi")
                                          .replace("type: classification", "type: cosine_classification"))
    common = ["finetune", "--task", "demo-nli-bi", "--task-defs", str(defs), "--data-dir", str(SAMPLE_DIR),
              "--encoder", tiny_encoder, "--lr", "30", "--warmup", "0", "--max-steps", "4", "--eval-every", "2",
              "--max-length", "48", "--no-baselines"]
    for flag in ("--lp-ft", "--no-lp-ft"):
        result = CliRunner().invoke(main, [*common, flag, "--output", str(tmp_path / flag)])
        assert result.exit_code == 0, result.output
    run = tmp_path / "--lp-ft" / "demo-nli-bi"
    evaluations = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluations = {r["step"]: r["selection"] for r in evaluations if r["split"] == "dev"}
    results = json.loads((run / "results.json").read_text())
    assert sorted(evaluations) == [0, 2, 4] and max(evaluations[2], evaluations[4]) < evaluations[0]
    assert results["best_step"] == 0 and results["dev"]["demo-nli-bi"]["accuracy"] == evaluations[0]
    assert results["start_scores"]["demo-nli-bi"]["accuracy"] == evaluations[0]
    plain = (tmp_path / "--no-lp-ft" / "demo-nli-bi" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in plain if '"dev"' in line] == [2, 4]


def test_baselines_do_not_change_what_a_run_trains(tmp_path: Path, tiny_encoder: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring the no-training baselines (an encoder loaded, probes fitted) draws nothing from the random
    generators training uses: the same command with and without them gives the same weights, bit for bit."""
    from safetensors.torch import load_file

    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    args = ["refine", "--tasks", "demo-ner,demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir",
            str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "4", "--batch-size", "8",
            "--max-train-examples", "24", "--max-length", "48", "--seed", "3"]
    for name, flag in (("with", "--baselines"), ("without", "--no-baselines")):
        result = CliRunner().invoke(main, [*args, flag, "--output", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    a, b = (load_file(str(tmp_path / name / "encoder" / "model.safetensors")) for name in ("with", "without"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((tmp_path / "without" / "results.json").read_text())["baselines"] == {}


def test_per_label_thresholds_are_chosen_by_f1_on_a_hand_made_set() -> None:
    from mtbio.kinds.heads.multilabel import fit_thresholds

    probabilities = [[0.30, 0.9, 0.1], [0.40, 0.8, 0.2], [0.10, 0.7, 0.3], [0.20, 0.2, 0.4]]
    gold = [[True, True, False], [True, True, False], [False, True, False], [False, False, False]]
    # label 0: positives at 0.30 and 0.40, negatives at 0.10 and 0.20 -> the midpoint 0.25 separates them (F1 1)
    # label 1: positives at 0.9, 0.8, 0.7, negative 0.2 -> 0.45 and the default 0.5 both separate them (F1 1): the
    #          default wins the tie; label 2: no positive example -> keeps the default 0.5
    assert fit_thresholds(probabilities, gold) == pytest.approx([0.25, 0.5, 0.5])
    # a negative above the default: the best cut moves up, to the midpoint above it
    assert fit_thresholds([[0.9], [0.6], [0.2]], [[True], [False], [False]]) == pytest.approx([0.75])
    # a tie between cuts of equal F1 goes to the one nearer the default
    assert fit_thresholds([[0.1], [0.9]], [[False], [True]]) == pytest.approx([0.5])


def test_fitted_thresholds_decide_and_export_as_a_bias_shift(tmp_path: Path, tiny_encoder: str) -> None:
    """--thresholds fit: the head saves one threshold per label, decodes with them, and an export (bias shifted by
    logit t) predicts the same label sets at 0.5 in a process without mtbio's model code."""
    from mtbio.model.heads import HeadConfig
    from mtbio.kinds.heads.multilabel import MultiLabelHead

    head = MultiLabelHead(HeadConfig(task="t", type="multilabel", hidden_size=4, labels=["a", "b"], dropout=0.0,
                                     thresholds=[0.2, 0.7]))
    logits = torch.log(torch.tensor([[0.3, 0.6], [0.1, 0.8]]) / (1 - torch.tensor([[0.3, 0.6], [0.1, 0.8]])))
    assert head.decode(logits, {}) == [["a"], ["b"]]
    shifted = logits - (head.out.bias - head.export_layer().bias)
    assert [[name for name, p in zip("ab", row) if p > 0.5] for row in torch.sigmoid(shifted).tolist()] == [["a"], ["b"]]

    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-hoc", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                       "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-steps", "4",
                                       "--batch-size", "16", "--thresholds", "fit", "--no-baselines",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "demo-hoc" / "heads" / "demo-hoc" / "head_config.json").read_text())
    assert len(saved["thresholds"]) == 10 and all(0 < t < 1 for t in saved["thresholds"])
    assert "thresholds: fit" in (out / "demo-hoc" / "config.yaml").read_text()
    export = tmp_path / "export"
    result = CliRunner().invoke(main, ["export", str(out / "demo-hoc"), "--task", "demo-hoc", "--output", str(export)])
    assert result.exit_code == 0, result.output  # the export's logit check allows for the folded thresholds


def test_pair_form_moves_a_pair_task_between_the_cross_and_bi_kinds_and_leaves_others() -> None:
    from mtbio.model.pair_form import pair_form, with_pair_form
    from mtbio.tasks.loading import load_task_def

    nli = load_task_def(SAMPLE_DIR / "task_defs" / "demo-nli.yml")
    ner = load_task_def(SAMPLE_DIR / "task_defs" / "demo-ner.yml")
    bi = with_pair_form(nli, "bi")
    assert (pair_form(nli), bi.type, pair_form(bi)) == ("cross", "cosine_classification", "bi")
    assert bi.labels == nli.labels and bi.columns == nli.columns and bi.metric == nli.metric
    assert with_pair_form(bi, "cross").model_dump() == nli.model_dump()
    assert with_pair_form(nli, "cross") is nli and pair_form(ner) is None and with_pair_form(ner, "bi") is ner


def test_pair_form_auto_takes_bi_only_when_its_probe_is_better_by_the_metrics_threshold() -> None:
    """Cross-validated probes: a feature that separates the labels scores 1.0, one that is noise about chance; the
    choice needs the metric's min_delta (0.01 for accuracy) over the other form's probe and over the trivial score,
    else the task keeps its own form."""
    import numpy as np

    from mtbio.data.example import Example
    from mtbio.model.pair_form import _cross_validated, choose_pair_form, with_pair_form
    from mtbio.tasks.loading import load_task_def

    nli = load_task_def(SAMPLE_DIR / "task_defs" / "demo-nli.yml")
    labels = ["entailment", "contradiction"] * 20
    examples = [Example(uid=str(i), text="a", text_b="b", label=label) for i, label in enumerate(labels)]
    separating = np.array([[1.0 if label == "entailment" else -1.0] for label in labels])
    assert _cross_validated(nli, separating, examples) == 1.0
    noise = np.random.default_rng(0).normal(size=(40, 1))
    assert _cross_validated(nli, noise, examples) < 0.8
    assert _cross_validated(nli, separating, examples[:3]) is None  # a label with fewer than 2 examples: no folds
    assert choose_pair_form(nli, {"cross": 0.55, "bi": 0.79}) == "bi"
    assert choose_pair_form(nli, {"cross": 0.86, "bi": 0.865}) == "cross"  # within 1 point: the task's own
    assert choose_pair_form(with_pair_form(nli, "bi"), {"cross": 0.86, "bi": 0.855}) == "bi"
    assert choose_pair_form(with_pair_form(nli, "bi"), {"cross": 0.9, "bi": 0.5}) == "cross"
    assert choose_pair_form(nli, {"cross": None, "bi": 0.9}) == "cross"
    # BioASQ's 670 training examples: the bi probe at the majority's 0.8239, the cross below it: no evidence
    assert choose_pair_form(nli, {"cross": 0.8030, "bi": 0.8239, "trivial": 0.8239}) == "cross"
    assert choose_pair_form(nli, {"cross": 0.55, "bi": 0.79, "trivial": 0.5}) == "bi"
    assert choose_pair_form(with_pair_form(nli, "bi"), {"cross": 0.9, "bi": 0.5, "trivial": 0.895}) == "bi"


def test_pair_form_auto_starts_a_cross_encoder_at_the_probe_that_chose_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Under --pair-form auto the cross form's head reads the packaged encoder's mean pooling, the features its
    probe and the no-training `probe` baseline read, so with LP-FT and a learning rate too small to move anything
    its dev score is that baseline's, to an example (the task's own [CLS] head would start elsewhere)."""
    from mtbio.experiments import training_run

    seen: list[str] = []

    def cross_wins(*args: Any) -> dict[str, float | None]:
        seen.append(args[-1])
        return {"cross": 0.9, "bi": 0.4, "trivial": 0.34}

    monkeypatch.setattr(training_run, "probe_scores", cross_wins)
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", "--task-defs", str(SAMPLE_DIR / "task_defs"),
                                       "--data-dir", str(SAMPLE_DIR), "--pair-form", "auto", "--lp-ft", "--lr", "1e-30",
                                       "--max-steps", "1", "--max-train-examples", "120", "--output", str(run)])
    assert result.exit_code == 0, result.output
    assert seen == ["mean"]
    results = json.loads((run / "demo-nli" / "results.json").read_text())
    assert results["pair_form"]["demo-nli"]["form"] == "cross"
    assert "pooling: mean" in (run / "demo-nli" / "tasks" / "demo-nli.yml").read_text()
    start, baseline = results["start_scores"]["demo-nli"]["accuracy"], results["baselines"]["demo-nli"]["probe"]
    assert abs(start - baseline) <= 1 / results["eval_examples"]["demo-nli"]["dev"] + 1e-9


def test_the_packaged_encoders_recipe_trains_100_mqp_pairs_as_a_bi_encoder(tmp_path: Path, data_dir: Path) -> None:
    """MQP at 100 examples: the zero-shot cosine's probe is far better than the cross-encoded pair's on the training
    examples, so the minilm recipe's `--pair-form auto` trains the cosine classifier and says why."""
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["finetune", "--task", "mqp", "--data-dir", str(data_dir), "--max-train-examples",
                                       "100", "--max-steps", "1", "--max-eval-examples", "16", "--no-baselines",
                                       "--output", str(run)])
    assert result.exit_code == 0, result.output
    results = json.loads((run / "mqp" / "results.json").read_text())
    chosen = results["pair_form"]["mqp"]
    assert chosen["form"] == "bi" and chosen["by"].startswith("auto")
    assert chosen["probes"]["bi"] - chosen["probes"]["cross"] > 0.1
    assert "type: cosine_classification" in (run / "mqp" / "tasks" / "mqp.yml").read_text()
    assert "pair_form: auto" in (run / "mqp" / "config.yaml").read_text()


def test_a_resumed_small_set_run_evaluates_where_an_uninterrupted_one_does(tmp_path: Path, tiny_encoder: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One-step epochs under a step floor are evaluated every tenth of the run (steps 3, 6, ...). A run resumed from
    the checkpoint of step 4, between two evaluations, evaluates at the same steps, keeps the same step and
    reports the same LP-FT start (its fitted heads and their dev scores travel with the checkpoints)."""
    from mtbio.training import checkpoint

    monkeypatch.setattr(checkpoint, "save_checkpoint", functools.partial(checkpoint.save_checkpoint, keep=0))
    common = ["finetune", "--task", "demo-relation", "--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir",
              str(SAMPLE_DIR), "--encoder", tiny_encoder, "--max-train-examples", "8", "--batch-size", "8",
              "--min-steps", "30", "--save-every", "2", "--max-length", "48", "--no-baselines", "--lp-ft"]
    result = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "through")])
    assert result.exit_code == 0, result.output
    through = tmp_path / "through" / "demo-relation"

    def resume_from_step_4(name: str, older: bool = False) -> Path:
        resumed = tmp_path / name / "demo-relation"
        shutil.copytree(through, resumed)
        for kept in (resumed / "checkpoints").iterdir():
            if int(kept.name.split("-")[1]) > 4:
                shutil.rmtree(kept)  # as if stopped after step 4's checkpoint
            elif older:  # written before `last_eval_step` was kept: the schedule listener kept the step then
                state = json.loads((kept / "state.json").read_text())
                last = state["trainer"].pop("last_eval_step")
                state["trainer"]["listeners"]["schedule"] = {"last_evaluated": last}
                (kept / "state.json").write_text(json.dumps(state))
                manifest = json.loads((kept / checkpoint.MANIFEST).read_text())
                manifest["files"]["state.json"] = {"bytes": (kept / "state.json").stat().st_size,
                                                   "sha256": checkpoint._sha256(kept / "state.json")}
                (kept / checkpoint.MANIFEST).write_text(json.dumps(manifest))
        (resumed / "results.json").unlink()
        result = CliRunner().invoke(main, [*common, "--output", str(tmp_path / name), "--resume"])
        assert result.exit_code == 0, result.output
        assert "resumed from" in (resumed / "run.log").read_text() and "(step 4)" in (resumed / "run.log").read_text()
        return resumed

    def evaluations(run: Path) -> dict[int, float]:
        lines = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        return {r["step"]: r["selection"] for r in lines if r["split"] == "dev"}

    resumed = resume_from_step_4("resumed")
    assert sorted(evaluations(through)) == list(range(0, 31, 3))
    assert evaluations(resumed) == pytest.approx(evaluations(through), abs=1e-6)
    assert sorted(evaluations(resume_from_step_4("older", older=True))) == list(range(0, 31, 3))
    first, second = (json.loads((run / "results.json").read_text()) for run in (through, resumed))
    assert [second[k] for k in ("best_step", "steps", "lp_start")] == [first[k] for k in ("best_step", "steps", "lp_start")]
    for key in ("start_scores", "dev"):
        flat = [{f"{task}/{name}": value for task, scores in r[key].items() for name, value in scores.items()}
                for r in (first, second)]
        assert flat[1] == pytest.approx(flat[0], abs=1e-6), key
    assert first["lp_start"] == ["demo-relation"] and first["start_scores"] != {}

    # stopped after the last checkpoint, before results.json: the resume writes results without a second evaluation
    final = tmp_path / "final" / "demo-relation"
    shutil.copytree(through, final)
    (final / "results.json").unlink()
    result = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "final"), "--resume"])
    assert result.exit_code == 0, result.output
    assert "(step 30)" in (final / "run.log").read_text()
    dev_steps = [r["step"] for r in map(json.loads, (final / "metrics.jsonl").read_text().splitlines())
                 if r["split"] == "dev"]
    assert dev_steps == list(range(0, 31, 3))
    assert json.loads((final / "results.json").read_text())["dev"] == first["dev"]
