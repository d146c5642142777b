"""The small-data recipe's pieces (issue 63) that are in place: sentence-level heads that read the mean of the
tokens, as the packaged sentence-transformers encoder embeds a text."""
from __future__ import annotations

import json
from pathlib import Path

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
    floored = CliRunner().invoke(main, [*args, "--min-steps", "30", "--output", str(tmp_path / "floor")])
    assert plain.exit_code == 0 and floored.exit_code == 0, plain.output + floored.output
    steps = {name: json.loads((tmp_path / name / "demo-relation" / "results.json").read_text())["steps"]
             for name in ("plain", "floor")}
    assert steps == {"plain": 4, "floor": 30}  # ceil(50 / 16) = 4 a epoch; 30 = 7 epochs and 2 steps
    curve = [json.loads(line) for line in (tmp_path / "floor" / "demo-relation" / "metrics.jsonl").read_text().splitlines()]
    assert max(r.get("step", 0) for r in curve) == 30
    config = (tmp_path / "floor" / "demo-relation" / "config.yaml").read_text()
    assert "min_steps: 30" in config
