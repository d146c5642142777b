"""The bi-encoder similarity kind: each text encoded on its own, cosine of pooled embeddings; it starts from the
encoder's zero-shot cosine, trains, reloads in a fresh process and exports in the sentence-transformers layout."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner
from transformers import AutoModel, AutoTokenizer

from mtbio.cli import main
from mtbio.data.pipeline import featurize_raw, raw_inputs_to_examples
from mtbio.experiments.training_run import head_config_for
from mtbio.model.heads import build_head
from mtbio.model.multitask import MultiTaskModel
from mtbio.tasks.schema import TaskDef

SAMPLE = Path(__file__).resolve().parents[1] / "mtbio" / "sample_data"
PAIRS = [("Aspirin reduced the fever.", "The fever went down after aspirin was given to the patient."),
         ("KRAS mutations drive tumours.", "The weather was cold.")]


def _definition(**changes: object) -> dict:
    text = yaml.safe_load((SAMPLE / "task_defs" / "demo-sts.yml").read_text())
    text.update({"name": "demo-sts-bi", "type": "bi_encoder", "type_options": {"label_range": [0, 5]}, **changes})
    return text


def test_its_options_and_shape_are_checked() -> None:
    with pytest.raises(ValueError, match="type_options.label_range"):
        TaskDef.model_validate(_definition(type_options={}))
    with pytest.raises(ValueError, match="label_range: the lowest value comes first"):
        TaskDef.model_validate(_definition(type_options={"label_range": [5, 0]}))
    with pytest.raises(ValueError, match="reads a pair of texts"):
        TaskDef.model_validate(_definition(columns={"id": 0, "text": -3, "label": -1}))


def test_the_untrained_model_predicts_the_encoders_zero_shot_cosine(tiny_encoder: str) -> None:
    task = TaskDef.model_validate(_definition())
    tokenizer, encoder = AutoTokenizer.from_pretrained(tiny_encoder), AutoModel.from_pretrained(tiny_encoder).eval()
    model = MultiTaskModel(encoder, {task.name: build_head(head_config_for(task, encoder.config.hidden_size))}).eval()
    data = featurize_raw(task, raw_inputs_to_examples(task, PAIRS), tokenizer)
    assert "segment_lengths" in data.columns  # each pair's two texts are the row's two segments
    batch = data.batch(range(len(data)), pad_token_id=tokenizer.pad_token_id)
    widths = [len(tokenizer(t)["input_ids"]) for pair in PAIRS for t in pair]
    assert int(batch["window"][0]) == max(widths) and batch["input_ids"].shape[1] == 2 * max(widths)
    with torch.no_grad():
        cosine = model(task.name, **batch).logits
        by_hand = []
        for a, b in PAIRS:  # mean over each text's own tokens, then the cosine
            ea, eb = (encoder(**tokenizer(t, return_tensors="pt")).last_hidden_state[0].mean(0) for t in (a, b))
            by_hand.append(float(ea @ eb / (ea.norm() * eb.norm())))
    assert cosine.tolist() == pytest.approx(by_hand, abs=1e-5)
    head = model.heads[task.name]
    assert not list(head.parameters())  # no weights: nothing random between the encoder and the prediction
    assert head.decode(cosine, batch) == pytest.approx([5 * c for c in by_hand], abs=1e-4)
    assert float(head.loss(torch.tensor([0.5]), torch.tensor([2.5]))) == 0.0  # the label scaled onto [0, 1]


def test_it_trains_reloads_in_a_fresh_process_and_exports_for_sentence_transformers(
        tmp_path: Path, tiny_encoder: str) -> None:
    defs = tmp_path / "defs"
    defs.mkdir()
    (defs / "demo-sts-bi.yml").write_text(yaml.safe_dump(_definition()))
    result = CliRunner().invoke(main, ["finetune", "--tasks", "demo-sts-bi", "--task-defs", str(defs), "--encoder",
                                       tiny_encoder, "--data-dir", str(SAMPLE), "--epochs", "1", "--batch-size", "16",
                                       "--max-train-examples", "64", "--output", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "runs" / "demo-sts-bi"
    results = json.loads((out / "results.json").read_text())
    assert set(results["dev"]["demo-sts-bi"]) >= {"pearson", "spearman"}
    code = ("import mtbio, json; run = mtbio.load(%r); print(json.dumps(run.predict('demo-sts-bi', %r)))"
            % (str(out), PAIRS))
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    predicted = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert len(predicted) == 2 and all(-5.0 <= p <= 5.0 for p in predicted)

    exported = tmp_path / "export"
    result = CliRunner().invoke(main, ["export", str(out), "--task", "demo-sts-bi", "--output", str(exported)])
    assert result.exit_code == 0, result.output
    assert {"modules.json", "config.json", "README.md"} <= {p.name for p in exported.iterdir()}
    assert "SentenceTransformer" in (exported / "README.md").read_text()
    code = ("from sentence_transformers import SentenceTransformer; import json; m = SentenceTransformer(%r); "
            "print(json.dumps([float(m.similarity(*m.encode(list(p)))[0][0]) for p in %r]))" % (str(exported), PAIRS))
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    cosines = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert [5 * c for c in cosines] == pytest.approx(predicted, abs=1e-3)  # the exported cosine is the head's
