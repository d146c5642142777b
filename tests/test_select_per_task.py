"""`--select per-task`: a joint run keeps each task's own best dev evaluation under best/<task>/, which finetune
--from, export and a one-task predict take."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR
from mtbio.experiments.training_run import train_tasks
from mtbio.tasks.loading import load_catalog
from mtbio.training.config import RunConfig
from mtbio.training.events import Flow, Listener
from mtbio.training.trainer import Trainer

# dev scores by step: demo-nli peaks at step 2, demo-sts at step 5; their mean peaks at step 5
SCRIPT = {"demo-nli": [0.1, 0.5, 0.3, 0.2, 0.1, 0.1], "demo-sts": [0.1, 0.2, 0.3, 0.4, 0.9, 0.2]}


class Weights(Listener):
    """The encoder's weights at every evaluation (the step's, before the next update)."""

    def __init__(self) -> None:
        self.at: dict[int, dict[str, torch.Tensor]] = {}

    def on_evaluate(self, trainer: Any, scores: dict, improved: bool, flow: Flow) -> None:
        self.at[trainer.state.global_step] = {k: v.detach().clone() for k, v in
                                              trainer.unwrapped.encoder.state_dict().items()}


def test_each_task_keeps_the_weights_of_its_own_best_step(tmp_path: Path, tiny_encoder: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def scripted(self: Trainer, split: str, tasks: Any = None) -> dict[str, dict[str, float]]:
        step = self.state.global_step
        return {name: {data.task.metric: SCRIPT[name][step - 1]} for name, data in self.data.items()
                if tasks is None or name in tasks}

    monkeypatch.setattr(Trainer, "_score", scripted)
    catalog = load_catalog([str(SAMPLE_DIR / "task_defs")])
    config = RunConfig(tasks=["demo-nli", "demo-sts"], task_defs=[str(SAMPLE_DIR / "task_defs")],
                       data_dir=str(SAMPLE_DIR), encoder=tiny_encoder, max_steps=6, eval_every=1, batch_size=8,
                       max_length=48, lr=1e-3, seed=3, mixed_precision="no", baselines=False, select_by="per-task",
                       eval_test=False)
    weights = Weights()
    run = tmp_path / "run"
    results = train_tasks([catalog.tasks["demo-nli"], catalog.tasks["demo-sts"]], config, run, tiny_encoder, 1e-3,
                          "refine", SAMPLE_DIR, listeners=[weights])
    assert results["best_step"] == 5  # the mean's best: the run's own encoder/
    assert {t: v["step"] for t, v in results["per_task_best"].items()} == {"demo-nli": 2, "demo-sts": 5}
    for task, step in (("demo-nli", 2), ("demo-sts", 5)):
        own = run / "best" / task
        saved = load_file(str(own / "encoder" / "model.safetensors"))
        assert all(torch.equal(saved[k], weights.at[step][k]) for k in saved)
        assert sorted(p.name for p in (own / "heads").iterdir()) == [task]
        mine = json.loads((own / "results.json").read_text())
        assert mine["best_step"] == step and mine["dev"][task] == {catalog.tasks[task].metric: SCRIPT[task][step - 1]}
    assert not torch.equal(weights.at[2][next(iter(weights.at[2]))], weights.at[5][next(iter(weights.at[5]))])


def test_finetune_export_and_predict_take_a_tasks_own_best(tmp_path: Path, tiny_encoder: str) -> None:
    defs = tmp_path / "defs"  # the demo tasks with their dev file as a test split too
    defs.mkdir()
    for name, folder, suffix in (("demo-nli", "nli", "jsonl"), ("demo-ner", "ner", "tsv")):
        text = (SAMPLE_DIR / "task_defs" / f"{name}.yml").read_text()
        (defs / f"{name}.yml").write_text(text.replace(f"  dev: {folder}/dev.{suffix}",
                                                       f"  dev: {folder}/dev.{suffix}\n  test: {folder}/dev.{suffix}"))
    common = ["--task-defs", str(defs), "--data-dir", str(SAMPLE_DIR), "--encoder", tiny_encoder,
              "--batch-size", "8", "--max-length", "48", "--no-baselines"]
    result = CliRunner().invoke(main, ["refine", "--tasks", "demo-nli,demo-ner", "--max-steps", "4", "--eval-every",
                                       "1", "--select", "per-task", "--eval-test", *common, "--output",
                                       str(tmp_path / "joint")])
    assert result.exit_code == 0, result.output
    for task in ("demo-nli", "demo-ner"):
        assert (tmp_path / "joint" / "best" / task / "encoder" / "config.json").is_file()
        assert set(json.loads((tmp_path / "joint" / "best" / task / "results.json").read_text())["test"]) == {task}
    result = CliRunner().invoke(main, ["finetune", "--from", str(tmp_path / "joint"), "--task", "demo-nli",
                                       "--max-steps", "1", *common[:4], "--batch-size", "8", "--max-length", "48",
                                       "--no-baselines", "--output", str(tmp_path / "ft")])
    assert result.exit_code == 0, result.output
    source = json.loads((tmp_path / "ft" / "demo-nli" / "results.json").read_text())["encoder_source"]
    assert Path(source) == tmp_path / "joint" / "best" / "demo-nli" / "encoder"
    result = CliRunner().invoke(main, ["export", str(tmp_path / "joint"), "--task", "demo-ner", "--output",
                                       str(tmp_path / "export")])
    assert result.exit_code == 0, result.output
    exported = load_file(str(tmp_path / "export" / "model.safetensors"))
    own = load_file(str(tmp_path / "joint" / "best" / "demo-ner" / "encoder" / "model.safetensors"))
    key = next(k for k in own if k.endswith("word_embeddings.weight"))
    assert torch.equal(exported[next(k for k in exported if k.endswith("word_embeddings.weight"))], own[key])
    inputs = tmp_path / "in.txt"
    inputs.write_text("A man sleeps.\tA man is awake.\nThe patient is febrile.\tThe patient has a fever.\n")
    result = CliRunner().invoke(main, ["predict", str(tmp_path / "joint"), "--task", "demo-nli", "--input",
                                       str(inputs), "--output", str(tmp_path / "p.jsonl")])
    assert result.exit_code == 0, result.output
    written = [json.loads(line)["prediction"] for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    own = __import__("mtbio").load(tmp_path / "joint" / "best" / "demo-nli")
    assert written == own.predict("demo-nli", [("A man sleeps.", "A man is awake."),
                                               ("The patient is febrile.", "The patient has a fever.")])
