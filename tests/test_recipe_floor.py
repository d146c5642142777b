"""The small-data recipe's floor and starts (issue 88): one floor (the best of the trivial score and every
no-training baseline), pair regressions in the form their probe favours, LP-FT starts that score what their probe
scores, fitted thresholds for positive-class F1, the benchmark's refusal and the demo's baseline row."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR

SAMPLES = ["--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR)]


def test_the_floor_is_the_best_of_the_trivial_score_and_the_baselines_with_one_warning(
        tmp_path: Path, tiny_encoder: str, monkeypatch) -> None:
    import mtbio.experiments.training_run as training_run
    from mtbio.model.floor import is_below_floor, task_floor

    assert task_floor(0.34, {"probe": 0.9, "cosine-mean": 0.5}, "accuracy") == {"score": 0.9, "source": "probe"}
    assert task_floor(0.34, {"probe": 0.2}, "accuracy") == {"score": 0.34, "source": "trivial"}
    assert task_floor(0.5, {"probe": 0.4}, "mse") == {"score": 0.4, "source": "probe"}  # lower is better
    assert is_below_floor(0.345, {"score": 0.34, "source": "trivial"}, "accuracy")  # within a point of a constant
    assert not is_below_floor(0.345, {"score": 0.34, "source": "probe"}, "accuracy")  # above a baseline
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(training_run, "no_training_baselines", lambda *a, **k: {"probe": 0.9})
    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["finetune", "--task", "demo-nli", *SAMPLES, "--encoder", tiny_encoder,
                                     "--max-steps", "1", "--lr", "1e-9", "--max-length", "48", "--output", str(run)])
    assert done.exit_code == 0, done.output
    warnings = [line for line in done.output.splitlines() if line.startswith("demo-nli:") and "floor" in line]
    assert len(warnings) == 1, done.output  # below its trivial score and its probe: one line, naming the higher
    assert ("demo-nli: below its floor: dev accuracy" in warnings[0]
            and "a logistic regression on frozen features (probe 0.9000)" in warnings[0])
    results = json.loads((run / "demo-nli" / "results.json").read_text())
    assert results["floor"]["demo-nli"] == {"score": 0.9, "source": "probe"} and results["below_floor"] == ["demo-nli"]
    assert "not_learned" not in results and "below_baselines" not in results


def _task_defs_with_entity_relation(tmp_path: Path) -> Path:
    """The samples' definitions and a relation task of the `entity_relation` kind on the relation sample."""
    import shutil

    import yaml

    defs = tmp_path / "defs"
    shutil.copytree(SAMPLE_DIR / "task_defs", defs)
    relation = yaml.safe_load((defs / "demo-relation.yml").read_text())
    relation.update(name="demo-entities", type="entity_relation", entity_markers="keep",
                    type_options={"markers": ["@DRUG$", "@DRUG$"]})
    (defs / "demo-entities.yml").write_text(yaml.safe_dump(relation))
    return defs


def test_an_lp_ft_start_scores_what_its_probe_scores_for_every_kind(tmp_path: Path, tiny_encoder: str,
                                                                      monkeypatch) -> None:
    """A sentence-level head of a single text (relation classes) and of a pair (NLI), multi-label, a regression of
    two texts, entity-start relations and tagging: each LP-FT start's dev score is its probe baseline's."""
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    tasks = ["demo-relation", "demo-nli", "demo-hoc", "demo-sts", "demo-entities", "demo-ner"]
    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["refine", "--tasks", ",".join(tasks), "--task-defs",
                                     str(_task_defs_with_entity_relation(tmp_path)), "--data-dir", str(SAMPLE_DIR),
                                     "--encoder", tiny_encoder, "--lp-ft", "--max-steps", "1", "--max-length", "48",
                                     "--max-train-examples", "80", "--output", str(run)])
    assert done.exit_code == 0, done.output
    results = json.loads((run / "results.json").read_text())
    assert sorted(results["lp_start"]) == sorted(tasks)
    for task in tasks:
        metric = next(iter(results["dev"][task]))
        # classes and tags to the example; a regression's Pearson to float32 rounding of its predictions
        assert results["start_scores"][task][metric] == pytest.approx(results["baselines"][task]["probe"], abs=1e-6), task
    assert "pooling: mean" in (run / "tasks" / "demo-relation.yml").read_text()  # the probe's, not [CLS]


def _tsv_task(tmp_path: Path, name: str, rows: dict[str, list[str]], definition: str) -> tuple[Path, Path]:
    """Task `name`'s TSV splits (split → rows) under tmp_path/data and its definition under tmp_path/defs: the
    domain, format and files written here, the rest (`definition`: YAML lines) given."""
    data = tmp_path / "data"
    (data / name).mkdir(parents=True)
    for split, lines in rows.items():
        (data / name / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    defs = tmp_path / "defs"
    defs.mkdir()
    files = ", ".join(f"{split}: {name}/{split}.tsv" for split in rows)
    (defs / f"{name}.yml").write_text(f"name: {name}\ndomain: demo\nformat: tsv\nfiles: {{{files}}}\n{definition}")
    return defs, data


def _uninformative_binary_task(tmp_path: Path) -> tuple[Path, Path]:
    """A binary relation set whose texts say nothing (one sentence for every example) and whose negative class is
    the majority (60%): the argmax predicts no positive (F1 0), the all-positive rule scores 2·0.4/1.4."""
    rows = {split: [f"{split}{i}\tThe drug was given with the other drug.\t{'none' if i % 5 < 3 else 'interacts'}"
                    for i in range(n)] for split, n in (("train", 50), ("dev", 20))}
    return _tsv_task(tmp_path, "rel", rows, "type: classification\ncolumns: {id: 0, text: 1, label: 2}\n"
                     "labels: [none, interacts]\nnegative_label: none\nmetric: micro_f1\n")


def test_a_positive_class_f1_fits_its_threshold_on_training_and_predict_and_export_use_it(
        tmp_path: Path, tiny_encoder: str, monkeypatch) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mtbio.kinds.heads.classification import fit_negative_threshold

    # the all-positive rule (every negative probability below the threshold) beats the argmax (nothing positive)
    assert fit_negative_threshold([0.6, 0.6, 0.6], [1, 1, 1], [0.4, 0.4, 0.4], [0, 1, 0], 0) == pytest.approx(0.8)
    assert fit_negative_threshold([0.2, 0.9], [1, 1], [0.8, 0.1], [1, 0], 0) is None  # the argmax is right already
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    defs, data = _uninformative_binary_task(tmp_path)
    args = ["finetune", "--task", "rel", "--task-defs", str(defs), "--data-dir", str(data), "--encoder", tiny_encoder,
            "--lp-ft", "--pooling", "cls", "--lr", "1e-9", "--max-steps", "1", "--max-length", "32"]
    scores = {}
    for rule in ("fixed", "fit"):
        done = CliRunner().invoke(main, [*args, "--thresholds", rule, "--output", str(tmp_path / rule)])
        assert done.exit_code == 0, done.output
        scores[rule] = json.loads((tmp_path / rule / "rel" / "results.json").read_text())["dev"]["rel"]["micro_f1"]
    assert scores == {"fixed": 0.0, "fit": pytest.approx(2 * 0.4 / 1.4)}
    run = tmp_path / "fit" / "rel"
    saved = json.loads((run / "heads" / "rel" / "head_config.json").read_text())
    assert saved["negative"] == "none" and len(saved["thresholds"]) == 1 and 0.5 < saved["thresholds"][0] < 1
    (tmp_path / "inputs.txt").write_text("The drug was given with the other drug.\n" * 3)
    done = CliRunner().invoke(main, ["predict", str(run), "--task", "rel", "--input", str(tmp_path / "inputs.txt"),
                                     "--output", str(tmp_path / "predicted.jsonl")])
    assert done.exit_code == 0, done.output
    predicted = [json.loads(line) for line in (tmp_path / "predicted.jsonl").read_text().splitlines()]
    assert [p["prediction"] for p in predicted] == ["interacts"] * 3
    done = CliRunner().invoke(main, ["export", str(run), "--task", "rel", "--output", str(tmp_path / "export")])
    assert done.exit_code == 0, done.output
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "export").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "export")
    with torch.no_grad():
        logits = model(**tokenizer(["The drug was given with the other drug."], return_tensors="pt")).logits
    assert model.config.id2label[int(logits.argmax(-1))] == "interacts"  # the threshold rides in the bias


def test_a_fitted_negative_threshold_among_three_classes_is_not_exported(tiny_encoder: str) -> None:
    from mtbio.errors import MtbioError
    from mtbio.kinds.heads.classification import ClassificationHead
    from mtbio.model.heads import HeadConfig

    head = ClassificationHead(HeadConfig(task="ddi", type="classification", hidden_size=4,
                                         labels=["none", "a", "b"], negative="none", thresholds=[0.7]))
    with pytest.raises(MtbioError, match="predicts 'none' only above a fitted probability"):
        head.export_layer()


def _pair_regression_task(tmp_path: Path) -> tuple[Path, Path]:
    """Pairs of six-word texts whose label is how many words the second shares with the first (0-6): the cosine of
    the two texts encoded on their own ranks them, a probe on the pair encoded together hardly can."""
    import random

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)]
    rows: dict[str, list[str]] = {}
    for split, n in (("train", 80), ("dev", 30)):
        rows[split] = []
        for i in range(n):
            first, shared = rng.sample(vocab, 6), i % 7
            second = first[:shared] + rng.sample([w for w in vocab if w not in first], 6 - shared)
            rng.shuffle(second)
            rows[split].append(f"{split}{i}\t{' '.join(first)}\t{' '.join(second)}\t{shared}")
    return _tsv_task(tmp_path, "pairs", rows, "type: regression\ncolumns: {id: 0, text: 1, text_b: 2, label: 3}\n"
                     "metric: pearson\n")


def test_pair_form_auto_trains_a_regression_of_two_texts_from_its_cosine(tmp_path: Path, tiny_encoder: str,
                                                                         monkeypatch) -> None:
    monkeypatch.setenv("MTBIO_CACHE_DIR", str(tmp_path / "cache"))
    defs, data = _pair_regression_task(tmp_path)
    run = tmp_path / "run"
    done = CliRunner().invoke(main, ["finetune", "--task", "pairs", "--task-defs", str(defs), "--data-dir", str(data),
                                     "--encoder", tiny_encoder, "--pair-form", "auto", "--lp-ft", "--lr", "1e-9",
                                     "--max-steps", "1", "--max-length", "32", "--output", str(run)])
    assert done.exit_code == 0, done.output
    results = json.loads((run / "pairs" / "results.json").read_text())
    chosen = results["pair_form"]["pairs"]
    assert chosen["form"] == "bi" and chosen["probes"]["bi"] > chosen["probes"]["cross"], chosen
    assert "type: cosine_regression" in (run / "pairs" / "tasks" / "pairs.yml").read_text()
    baselines = results["baselines"]["pairs"]
    assert baselines["cosine-mean"] > baselines["probe"]  # the set as made: the cosine beats the cross probe
    # the start is the zero-shot cosine, scaled onto the labels by the baseline's own linear fit
    assert results["start_scores"]["pairs"]["pearson"] == pytest.approx(baselines["cosine-mean"], abs=1e-6)
    assert results["dev"]["pairs"]["pearson"] >= baselines["cosine-mean"] - 1e-6
    assert results["below_floor"] == []


def _bench_train():
    import importlib
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    return importlib.import_module("bench_train")


def test_bench_train_trains_both_sides_at_the_recipe_rate_and_refuses_a_difference_at_a_trivial_score() -> None:
    from types import SimpleNamespace

    bench = _bench_train()
    args = SimpleNamespace(lr=None, encoder=None, batch_size=32, max_length=128)
    assert bench.hyperparameters(args)["lr"] == 2e-4  # the packaged MiniLM's recipe, for mtbio and the Trainer
    assert bench.hyperparameters(SimpleNamespace(**{**vars(args), "lr": 1e-3}))["lr"] == 1e-3

    def side(dev: float) -> dict:
        return {"train_examples_per_second": 30.0, "dev_mean": dev, "dev_sd": 0.0, "peak_memory_mb": 900.0,
                "trivial": 0.0, "mean_train_flops_per_example": 1e6}

    task = SimpleNamespace(name="bc5cdr-chem")
    unlearned = {"metric": "entity_f1", "sides": {"mtbio-no": side(0.62), "trainer-no": side(0.004)}}
    line = bench.summarise(task, unlearned, {"fp32": 1e11})
    assert unlearned["difference_points_fp32"] is None and unlearned["speed_ratio_fp32"] == 1.0
    assert "quality not compared: trainer-no ends at its trivial score (dev entity_f1 0.0040, trivial 0.0000)" in line
    assert unlearned["quality_refused_fp32"].startswith("trainer-no ends at its trivial score")
    learned = {"metric": "entity_f1", "sides": {"mtbio-no": side(0.62), "trainer-no": side(0.60)}}
    line = bench.summarise(task, learned, {"fp32": 1e11})
    assert learned["difference_points_fp32"] == pytest.approx(2.0) and "(+2.00 pts)" in line
    assert "quality_refused_fp32" not in learned
