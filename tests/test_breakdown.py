"""Per-type tables behind micro F1, and `mtbio evaluate --save-predictions`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio.cli import main
from mtbio.evaluation.breakdown import per_type_counts
from mtbio.evaluation.metrics import entity_f1, micro_f1, score_task
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.finetune import finetune
from mtbio.tasks.loading import load_catalog
from mtbio.training.config import RunConfig

CATALOG = load_catalog([str(SAMPLE_DIR / "task_defs")])


def test_entity_types_counted_by_hand_add_up_to_entity_f1() -> None:
    task = CATALOG.tasks["demo-ner"]
    gold = [["B-Chemical", "I-Chemical", "O", "B-Disease"], ["O", "B-Disease", "I-Disease", "O"]]
    pred = [["B-Chemical", "I-Chemical", "O", "O"], ["B-Chemical", "B-Disease", "O", "O"]]
    table = per_type_counts(task, gold, pred)
    # Chemical: one right (0:0-1), one spurious (1:0); Disease: both missed (0:3, 1:1-2 predicted as 1:1 only)
    assert table["Chemical"] == {"tp": 1, "fp": 1, "fn": 0, "precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3)}
    assert (table["Disease"]["tp"], table["Disease"]["fp"], table["Disease"]["fn"]) == (0, 1, 2)
    assert (table["micro"]["tp"], table["micro"]["fp"], table["micro"]["fn"]) == (1, 2, 2)
    assert table["micro"]["f1"] == pytest.approx(entity_f1(gold, pred, task)) == pytest.approx(2 / 6)


def test_labels_counted_by_hand_add_up_to_micro_f1_without_the_negative_class() -> None:
    task = CATALOG.tasks["demo-relation"]  # negative label DDI-false
    gold = ["DDI-false", "DDI-effect", "DDI-effect", "DDI-advise", "DDI-false"]
    pred = ["DDI-effect", "DDI-effect", "DDI-false", "DDI-advise", "DDI-false"]
    table = per_type_counts(task, gold, pred)
    assert "DDI-false" not in table
    assert (table["DDI-effect"]["tp"], table["DDI-effect"]["fp"], table["DDI-effect"]["fn"]) == (1, 1, 1)
    assert (table["DDI-advise"]["tp"], table["DDI-advise"]["fp"], table["DDI-advise"]["fn"]) == (1, 0, 0)
    assert table["micro"]["f1"] == pytest.approx(micro_f1(gold, pred, task)) == pytest.approx(4 / 6)


def test_evaluate_save_predictions_rescore_to_the_reported_f1(tmp_path: Path, tiny_encoder: str) -> None:
    config = RunConfig(tasks=["demo-ner"], task_defs=[str(SAMPLE_DIR / "task_defs")], data_dir=str(SAMPLE_DIR),
                       encoder=tiny_encoder, output=str(tmp_path / "ner"), max_steps=150, lr=3e-3, batch_size=16,
                       max_length=48, mixed_precision="no")
    [(run_dir, _)] = finetune(config)
    done = CliRunner().invoke(main, ["evaluate", str(run_dir), "--data-dir", str(SAMPLE_DIR), "--save-predictions",
                                     "--output", str(tmp_path / "eval.json")])
    assert done.exit_code == 0, done.output
    reported = json.loads((tmp_path / "eval.json").read_text())["rows"][0]["primary"]["demo-ner"]
    records = [json.loads(line) for line in (run_dir / "predictions" / "dev-demo-ner.jsonl").read_text().splitlines()]
    assert len(records) == 80 and all(len(r["tokens"]) == len(r["prediction"]) for r in records)
    task = CATALOG.tasks["demo-ner"]
    rescored = score_task(task, [r["gold"] for r in records], [r["prediction"] for r in records])["entity_f1"]
    assert rescored == reported and reported > 0.0  # the run found entities: the table is not all zeros
    types = json.loads((run_dir / "predictions" / "dev-demo-ner.types.json").read_text())
    assert set(types) - {"micro"} <= {"Chemical", "Disease"}
    assert sum(t["tp"] for n, t in types.items() if n != "micro") == types["micro"]["tp"]
    assert types["micro"]["f1"] == pytest.approx(reported)
    assert "demo-ner: per type" in done.output and "micro" in done.output
