"""ModernBERT, the 2026 encoder family (issue 67), built tiny and random in code: fine-tune with packed tagging
batches, refine on two tasks, LoRA with mtbio's default targets, predict, an export refused with its reason, and a
resume that gives the uninterrupted run's weights bit for bit."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from mtbio.cli import main
from mtbio.experiments.demo import SAMPLE_DIR


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _common(encoder: str) -> list[str]:
    return ["--task-defs", str(SAMPLE_DIR / "task_defs"), "--data-dir", str(SAMPLE_DIR), "--encoder", encoder,
            "--batch-size", "8", "--no-baselines"]


def test_modernbert_finetunes_packed_refines_two_tasks_and_predicts(tmp_path: Path, tiny_modernbert: str) -> None:
    _run("finetune", "--task", "demo-ner", "--max-steps", "3", *_common(tiny_modernbert), "--output", str(tmp_path / "ner"))
    results = json.loads((tmp_path / "ner" / "demo-ner" / "results.json").read_text())
    assert results["packed_tasks"] == ["demo-ner"]  # packed rows give ModernBERT's unpacked hidden states
    _run("refine", "--tasks", "demo-ner,demo-nli", "--max-steps", "4", *_common(tiny_modernbert),
         "--output", str(tmp_path / "refine"))
    refined = json.loads((tmp_path / "refine" / "results.json").read_text())
    assert set(refined["dev"]) == {"demo-ner", "demo-nli"}
    inputs = tmp_path / "in.txt"
    inputs.write_text("Aspirin causes nausea .\n")
    _run("predict", str(tmp_path / "ner" / "demo-ner"), "--task", "demo-ner", "--input", str(inputs))
    written = tmp_path / "ner" / "demo-ner" / "predictions" / "demo-ner-in.jsonl"
    records = [json.loads(line) for line in written.read_text().splitlines()]
    assert len(records) == 1 and len(records[0]["prediction"]) == 4  # a tag per word


def test_modernbert_lora_takes_mtbios_default_targets(tmp_path: Path, tiny_modernbert: str) -> None:
    """PEFT names no LoRA targets for modernbert; mtbio's default is the fused query-key-value linear, Wqkv."""
    _run("finetune", "--task", "demo-nli", "--adapter", "lora", "--max-steps", "2", *_common(tiny_modernbert),
         "--output", str(tmp_path / "lora"))
    config = json.loads((tmp_path / "lora" / "demo-nli" / "heads" / "demo-nli" / "adapter" /
                         "adapter_config.json").read_text())
    assert config["target_modules"] == ["Wqkv"]


def test_modernbert_export_is_refused_in_one_line_naming_its_own_layers(tmp_path: Path, tiny_modernbert: str) -> None:
    _run("finetune", "--task", "demo-ner", "--max-steps", "2", *_common(tiny_modernbert), "--output", str(tmp_path / "r"))
    result = CliRunner().invoke(main, ["export", str(tmp_path / "r" / "demo-ner"), "--task", "demo-ner",
                                       "--output", str(tmp_path / "export")])
    assert result.exit_code != 0 and not (tmp_path / "export").exists()
    assert "ModernBertForTokenClassification puts layers of its own (head)" in result.output


def test_a_resumed_modernbert_run_ends_bit_identical(tmp_path: Path, tiny_modernbert: str) -> None:
    args = ["finetune", "--task", "demo-nli", "--max-steps", "4", "--save-every", "2", *_common(tiny_modernbert)]
    _run(*args, "--output", str(tmp_path / "straight"))
    straight = tmp_path / "straight" / "demo-nli"
    resumed = tmp_path / "resumed" / "demo-nli"
    shutil.copytree(straight, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step-00000004")  # as if stopped after the step-2 checkpoint
    (resumed / "results.json").unlink()
    _run(*args, "--resume", "--output", str(tmp_path / "resumed"))
    for name in ("model.safetensors",):
        a = load_file(str(straight / "checkpoints" / "step-00000004" / name))
        b = load_file(str(resumed / "checkpoints" / "step-00000004" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("model_type", ["modernbert"])
def test_the_lora_default_is_documented(model_type: str) -> None:
    from mtbio.model.adapters import MTBIO_TARGET_MODULES

    commands = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text()
    assert model_type in MTBIO_TARGET_MODULES and "Wqkv" in commands


def test_a_task_may_ask_for_a_long_context_encoders_8192_tokens() -> None:
    from pydantic import ValidationError

    from mtbio.tasks.schema import TaskDef

    base = dict(name="long", type="classification", format="tsv", files={"train": "x"}, labels=["a", "b"])
    assert TaskDef(**base, max_length=8192).max_length == 8192
    with pytest.raises(ValidationError):
        TaskDef(**base, max_length=8193)
