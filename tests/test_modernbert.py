"""ModernBERT, the 2026 encoder family (issue 67), built tiny and random in code: fine-tune with packed tagging
batches, refine on two tasks, LoRA with mtbio's default targets, predict, exports that are ModernBERT's own
AutoModelFor* classes (the head trains their classifier block), and a
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


@pytest.mark.parametrize("task,pooling", [("demo-ner", "task"), ("demo-nli", "cls"), ("demo-nli", "mean"),
                                          ("demo-hoc", "mean")])
def test_modernbert_exports_exactly_and_its_pipeline_predicts_what_mtbio_does(tmp_path: Path, tiny_modernbert: str,
                                                                            task: str, pooling: str) -> None:
    """ModernBERT's AutoModelFor* classes put a dense → GELU → LayerNorm block before the classifier; an mtbio head on
    ModernBERT trains that block, so the export is the class itself (its classifier_pooling set to the head's) and
    the export's own logit check passes; a pipeline over it predicts mtbio's labels."""
    from transformers import pipeline

    import mtbio

    _run("finetune", "--task", task, "--max-steps", "3", "--pooling", pooling, *_common(tiny_modernbert),
         "--output", str(tmp_path / "r"))
    head = json.loads((tmp_path / "r" / task / "heads" / task / "head_config.json").read_text())
    assert head["block"]["family"] == "modernbert" and head["block"]["classifier_activation"] == "gelu"
    _run("export", str(tmp_path / "r" / task), "--task", task, "--output", str(tmp_path / "export"))
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    run = mtbio.load(tmp_path / "r" / task)
    if task == "demo-ner":
        words = ["Aspirin", "causes", "nausea", "."]
        nlp = pipeline("token-classification", model=str(tmp_path / "export"))
        tags = [item["entity"] for item in nlp(" ".join(words))]
        assert len(tags) >= 1 and set(tags) <= set(config["label2id"])
        return
    assert config["classifier_pooling"] == pooling
    nlp = pipeline("text-classification", model=str(tmp_path / "export"), top_k=None)
    text = ("A man sleeps.", "A man is awake.") if task == "demo-nli" else "Tumour cells evade apoptosis."
    found = nlp({"text": text[0], "text_pair": text[1]} if isinstance(text, tuple) else text)
    found = found[0] if isinstance(found[0], list) else found
    best = max(found, key=lambda item: item["score"])["label"]
    predicted = run.predict(task, [text])[0]
    if task == "demo-nli":
        assert best == predicted
    else:  # multi-label: the pipeline's sigmoid scores above 0.5 are mtbio's labels
        assert sorted(item["label"] for item in found if item["score"] > 0.5) == sorted(predicted)


def test_modernbert_lora_run_exports_as_a_peft_adapter(tmp_path: Path, tiny_modernbert: str) -> None:
    _run("finetune", "--task", "demo-nli", "--adapter", "lora", "--max-steps", "2", *_common(tiny_modernbert),
         "--output", str(tmp_path / "lora"))
    _run("export", str(tmp_path / "lora" / "demo-nli"), "--task", "demo-nli", "--output", str(tmp_path / "export"))
    assert (tmp_path / "export" / "adapter_config.json").is_file()


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
