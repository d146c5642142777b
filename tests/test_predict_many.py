"""Many tasks in one pass (issue 67): tasks whose inputs tokenize alike share one encoder pass, and give exactly
what one pass per task gives."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import mtbio
from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR

TEXTS = ["Aspirin causes nausea .", "Cisplatin induced apoptosis in tumour cells .", "No interaction was seen ."]


@pytest.fixture(scope="module")
def joint_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    out = tmp_path_factory.mktemp("joint") / "run"
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-ner,demo-hoc,demo-nli", "--task-defs",
                                       str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR), "--encoder",
                                       tiny_encoder, "--max-steps", "3", "--batch-size", "8", "--no-baselines",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_tasks_that_tokenize_alike_share_one_encoder_pass_and_match_per_task_predictions(
        joint_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = mtbio.load(joint_run)
    separate = {task: run.predict(task, TEXTS, scores=True) for task in ("demo-ner", "demo-hoc")}
    calls = []
    forward = run.model.encoder.forward
    monkeypatch.setattr(run.model.encoder, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    together = run.predict(["demo-ner", "demo-hoc"], TEXTS, scores=True)
    assert len(calls) == 1  # three short inputs: one batch, encoded once for both heads
    for i, record in enumerate(together):
        for task in ("demo-ner", "demo-hoc"):
            (prediction, probabilities), (expected, expected_scores) = record[task], separate[task][i]
            assert prediction == expected
            if isinstance(probabilities, dict):
                assert probabilities == pytest.approx(expected_scores, abs=1e-6)
            else:
                assert torch.allclose(torch.tensor(probabilities), torch.tensor(expected_scores), atol=1e-6)


def test_a_pair_task_takes_its_own_pass_beside_the_shared_one(joint_run: Path) -> None:
    run = mtbio.load(joint_run)
    pairs = [f"{t}\t{t}" for t in TEXTS]
    together = run.predict(["demo-nli", "demo-hoc"], pairs)
    assert [r["demo-nli"] for r in together] == run.predict("demo-nli", pairs)
    assert [r["demo-hoc"] for r in together] == run.predict("demo-hoc", pairs)


def test_predict_cli_writes_one_line_per_input_with_every_tasks_prediction(joint_run: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in.txt"
    inputs.write_text("\n".join(TEXTS) + "\n")
    result = CliRunner().invoke(main, ["predict", str(joint_run), "--tasks", "demo-ner,demo-hoc", "--input",
                                       str(inputs), "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == 3 and set(records[0]["prediction"]) == {"demo-ner", "demo-hoc"}
    assert len(records[0]["prediction"]["demo-ner"]) == 4 and set(records[0]["entities"]) == {"demo-ner"}
    refused = CliRunner().invoke(main, ["predict", str(joint_run), "--input", str(inputs)])
    assert refused.exit_code != 0 and "--task NAME, or --tasks" in refused.output


def test_tasks_with_lora_adapters_share_one_pass_through_mixed_adapter_batches(
        tmp_path: Path, tiny_encoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each task's rows run through its own adapter within one encoder call (PEFT's mixed batches), giving what a
    pass per task gives."""
    out = tmp_path / "lora"
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-ner,demo-hoc", "--task-defs",
                                       str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR), "--encoder",
                                       tiny_encoder, "--adapter", "lora", "--lr", "1e-2", "--max-steps", "4",
                                       "--batch-size", "8", "--no-baselines", "--output", str(out)])
    assert result.exit_code == 0, result.output
    run = mtbio.load(out)
    assert set(run.model.adapters) == {"demo-ner", "demo-hoc"}
    separate = {task: run.predict(task, TEXTS, scores=True) for task in ("demo-ner", "demo-hoc")}
    calls = []
    forward = run.model.encoder.forward
    monkeypatch.setattr(run.model.encoder, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    together = run.predict(["demo-ner", "demo-hoc"], TEXTS, scores=True)
    assert len(calls) == 1
    for i, record in enumerate(together):
        (tags, tag_scores), (expected_tags, expected_tag_scores) = record["demo-ner"], separate["demo-ner"][i]
        assert tags == expected_tags and torch.allclose(torch.tensor(tag_scores), torch.tensor(expected_tag_scores),
                                                        atol=1e-6)
        (labels, label_scores), (expected_labels, expected_label_scores) = record["demo-hoc"], separate["demo-hoc"][i]
        assert labels == expected_labels and label_scores == pytest.approx(expected_label_scores, abs=1e-6)
    base = run.model.encoder  # the adapters differ, so a shared pass without them would not match
    assert any(not torch.equal(p.detach(), torch.zeros_like(p)) for n, p in base.named_parameters() if "lora_B" in n)


def test_tasks_reading_windows_share_one_pass_with_their_adapters(tmp_path: Path, tiny_encoder: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two LoRA tasks that read the same windows (`sliding_window`) share one encoder call that encodes window by
    window, and predict what a pass per task predicts."""
    defs = tmp_path / "defs"
    defs.mkdir()
    for name in ("demo-ner", "demo-hoc"):
        text = (SAMPLE_DIR / "task_defs" / f"{name}.yml").read_text()
        text = "\n".join(line for line in text.splitlines() if not line.startswith("max_length:"))
        (defs / f"{name}-long.yml").write_text(text.replace(f"name: {name}", f"name: {name}-long")
                                               + "\nmax_length: 8\nsliding_window: {stride: 2}\n")
    tasks = ["demo-ner-long", "demo-hoc-long"]
    result = CliRunner().invoke(main, ["refine", "--tasks", ",".join(tasks), "--task-defs", str(defs), "--data-dir",
                                       str(SAMPLE_DIR), "--encoder", tiny_encoder, "--adapter", "lora", "--lr", "1e-2",
                                       "--max-steps", "2", "--batch-size", "8", "--no-baselines", "--output",
                                       str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    run = mtbio.load(tmp_path / "run")
    separate = {task: run.predict(task, TEXTS, scores=True) for task in tasks}
    calls = []
    forward = run.model.encoder.forward
    monkeypatch.setattr(run.model.encoder, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or forward(*a, **k))
    together = run.predict(tasks, TEXTS, scores=True)
    assert len(calls) == 1 and calls[0][1] == 8  # one call, on windows of 8 tokens
    for i, record in enumerate(together):
        (tags, tag_scores), (expected_tags, expected_tag_scores) = record[tasks[0]], separate[tasks[0]][i]
        assert tags == expected_tags and torch.allclose(torch.tensor(tag_scores), torch.tensor(expected_tag_scores),
                                                        atol=1e-6)
        (labels, label_scores), (expected_labels, expected_label_scores) = record[tasks[1]], separate[tasks[1]][i]
        assert labels == expected_labels and label_scores == pytest.approx(expected_label_scores, abs=1e-6)
