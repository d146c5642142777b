"""Transfer predictors without a joint run (size_ratio, text_similarity, fisher) on a setup whose answer
is known, their affinity.json as `mtbio report PAIRWISE PREDICTION` reads it, and the registry."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FILLER, _rows, _write

from mtbio.cli import main
from mtbio.errors import MtbioError
from mtbio.experiments.affinity import affinity
from mtbio.experiments.predictors import PREDICTORS
from mtbio.experiments.study_config import StudyConfig


@pytest.fixture(scope="module")
def known_tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(task-defs dir, data dir) of four keyword tasks around the target `tgt` (48 training sentences):

    copy:     the target's own training sentences and labels (a helper by construction);
    shuffled: the target's sentences with shuffled labels (the same texts, no information);
    filler:   96 sentences of filler words only, labelled at random (other texts, twice the size).
    """
    root = tmp_path_factory.mktemp("known-tasks")
    rng = random.Random(3)
    target, dev = _rows(rng, 48, "t"), _rows(rng, 24, "d")
    labels = [r[2] for r in target]
    rng.shuffle(labels)
    filler = [(f"f{i}", " ".join(rng.choice(FILLER[:6]) for _ in range(5)), rng.choice(["pos", "neg"]))
              for i in range(96)]
    rows = {"tgt": target, "copy": target, "shuffled": [(a, b, lab) for (a, b, _), lab in zip(target, labels)],
            "filler": filler}
    (root / "defs").mkdir()
    for name, train in rows.items():
        _write(root / "data" / name / "train.tsv", train)
        _write(root / "data" / name / "dev.tsv", dev)
        (root / "defs" / f"{name}.yml").write_text(
            f"name: {name}\ntype: classification\nformat: tsv\ncolumns: {{id: 0, text: 1, label: 2}}\n"
            f"files: {{train: {name}/train.tsv, dev: {name}/dev.tsv}}\nlabels: [pos, neg]\nmetric: accuracy\n"
            "max_length: 16\n")
    return str(root / "defs"), str(root / "data")


def _run(known_tasks: tuple[str, str], encoder: str, output: Path, predictor: str, **extra: object) -> dict:
    defs, data = known_tasks
    config = StudyConfig(tasks=["tgt", "copy", "shuffled", "filler"], task_defs=[defs], data_dir=data, encoder=encoder,
                       output=str(output), predictor=predictor, batch_size=8, **extra)
    directory, result = affinity(config, echo=lambda _: None)
    assert json.loads((directory / "affinity.json").read_text()) == json.loads(json.dumps(result))
    assert (directory / f"{predictor}_matrix.csv").is_file() and (directory / f"{predictor}_matrix.png").is_file()
    return result


def _scores(result: dict, name: str) -> dict[tuple[str, str], float]:
    return {(e["source"], e["target"]): e["score"] for e in result["predictors"][name]["edges"]}


def test_size_ratio_is_the_log_of_the_training_sizes(tmp_path: Path, micro_encoder: str,
                                                     known_tasks: tuple[str, str]) -> None:
    result = _run(known_tasks, micro_encoder, tmp_path / "size", "size_ratio")
    scores = _scores(result, "size_ratio")
    assert scores[("filler", "tgt")] == pytest.approx(math.log(2))
    assert scores[("tgt", "filler")] == pytest.approx(-math.log(2))
    assert scores[("copy", "tgt")] == 0.0 and len(scores) == 12
    assert result["predictors"]["size_ratio"]["symmetric"] is False
    assert result["measurement"] == {"train_examples": {"tgt": 48, "copy": 48, "shuffled": 48, "filler": 96}}
    capped = _run(known_tasks, micro_encoder, tmp_path / "capped", "size_ratio", max_train_examples=48)
    assert set(_scores(capped, "size_ratio").values()) == {0.0}
    # a small-data target beside full-size partners: --task-examples caps one task
    small = _run(known_tasks, micro_encoder, tmp_path / "small", "size_ratio", max_train_examples=48,
                 task_examples=["tgt=12"])
    assert _scores(small, "size_ratio")[("copy", "tgt")] == pytest.approx(math.log(4))


def test_text_similarity_ranks_the_targets_own_texts_above_other_texts(
        tmp_path: Path, micro_encoder: str, known_tasks: tuple[str, str]) -> None:
    result = _run(known_tasks, micro_encoder, tmp_path / "text", "text_similarity", predictor_examples=32)
    scores = _scores(result, "text_similarity")
    assert scores[("copy", "tgt")] == pytest.approx(1.0) and scores[("shuffled", "tgt")] == pytest.approx(1.0)
    assert scores[("filler", "tgt")] < scores[("copy", "tgt")] - 1e-3
    assert all(scores[(s, t)] == pytest.approx(scores[(t, s)]) for s, t in scores)
    assert result["predictors"]["text_similarity"]["symmetric"] is True
    assert result["compute"]["measure_forward_examples"] == 4 * 32


def test_fisher_scores_the_targets_own_data_highest(tmp_path: Path, micro_encoder: str,
                                                          known_tasks: tuple[str, str]) -> None:
    result = _run(known_tasks, micro_encoder, tmp_path / "fisher", "fisher", predictor_examples=24, fisher_steps=30,
                  seeds=2)
    scores = _scores(result, "fisher")
    # the same data gives the same embedding; the same texts under other labels do not (the head learned them)
    assert scores[("copy", "tgt")] == pytest.approx(1.0)
    assert scores[("shuffled", "tgt")] < 1 - 1e-3 and scores[("filler", "tgt")] < 1 - 1e-3
    edge = next(e for e in result["predictors"]["fisher"]["edges"] if (e["source"], e["target"]) == ("copy", "tgt"))
    assert set(edge["per_seed"]) == {"42", "43"} and edge["sd_seeds"] is not None
    assert result["compute"]["measure_backward_examples"] == 2 * 4 * 24
    assert result["compute"]["train_examples"] == 2 * 4 * 30 * 8


def test_the_registry_names_the_predictors_and_refuses_unknown_ones(tmp_path: Path, micro_encoder: str,
                                                                     known_tasks: tuple[str, str]) -> None:
    assert {"lookahead", "cosine", "size_ratio", "text_similarity", "fisher"} <= set(PREDICTORS.names())
    with pytest.raises(ValueError, match="unknown transfer predictor 'nope'.*size_ratio"):  # by the config itself
        _run(known_tasks, micro_encoder, tmp_path / "nope", "nope")


def test_a_cheap_prediction_is_judged_against_a_pairwise_graph(tmp_path: Path, micro_encoder: str,
                                                              known_tasks: tuple[str, str]) -> None:
    """`mtbio report PAIRWISE PREDICTION` reads the new affinity.json unchanged (a handmade measured graph)."""
    defs, data = known_tasks
    common = ["--tasks", "tgt,copy,shuffled,filler", "--task-defs", defs, "--data-dir", data, "--encoder",
              micro_encoder]
    done = CliRunner().invoke(main, ["affinity", *common, "--predictor", "size_ratio", "--output", str(tmp_path / "p")])
    assert done.exit_code == 0, done.output
    assert "log(source training examples" in done.output and "most promising source" in done.output
    tasks = ["tgt", "copy", "shuffled", "filler"]
    measured = {(s, t): (0.05 if s == "filler" else -0.01 * i) for t in tasks for i, s in enumerate(tasks) if s != t}
    (tmp_path / "pw").mkdir()
    (tmp_path / "pw" / "relations.json").write_text(json.dumps(
        {"kind": "pairwise", "split": "dev", "seeds": [42], "nodes": [{"task": t} for t in tasks],
         "edges": [{"source": s, "target": t, "delta": d} for (s, t), d in measured.items()]}))
    report = CliRunner().invoke(main, ["report", str(tmp_path / "pw"), str(tmp_path / "p")])
    assert report.exit_code == 0, report.output
    saved = json.loads((tmp_path / "p" / "comparison.json").read_text())
    assert list(saved["predictors"]) == ["size_ratio"] and saved["best_predictor"] == "size_ratio"
    assert saved["predictors"]["size_ratio"]["within_target"]["targets"] == 4
    assert "size_ratio within target" in report.output

    pruned = CliRunner().invoke(main, ["pairwise", *common, "--prune", "1", "--affinity", str(tmp_path / "p"),
                                       "--prune-by", "cosine", "--output", str(tmp_path / "pp"), "--dry-run"])
    assert pruned.exit_code == 2 and "no predictor 'cosine' (it has: size_ratio)" in pruned.output
    planned = CliRunner().invoke(main, ["pairwise", *common, "--prune", "1", "--affinity", str(tmp_path / "p"),
                                        "--output", str(tmp_path / "pp"), "--dry-run", "--seeds", "1"])
    assert planned.exit_code == 0, planned.output
    assert "ranked by size_ratio" in planned.output and "pair tgt + filler" in planned.output


def test_a_predictor_has_an_options_model_set_by_its_flags(tmp_path: Path) -> None:
    from mtbio.experiments.predictors import FisherOptions, PredictionJob

    config = StudyConfig(predictor="fisher", predictor_examples=12, fisher_steps=3)
    assert PREDICTORS.get("fisher").options is FisherOptions
    assert PredictionJob(config, [], tmp_path, tmp_path).options == FisherOptions(examples=12, head_steps=3)
    assert PredictionJob(config.model_copy(update={"predictor": "size_ratio"}), [], tmp_path, tmp_path).options.model_dump() == {}
