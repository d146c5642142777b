"""Acceptance: shipped task definitions (sentence heads read [CLS]) export, and plain transformers' `pipeline()`
in a process without mtbio reproduces `mtbio predict` (labels equal, scores to 1e-4)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtbio import cli
from mtbio.experiments.refine import refine
from mtbio.training.config import RunConfig

DATA = os.environ.get("MTBIO_DATA_DIR", "")
TASKS = ["ddi", "chemprot", "mqp", "bc5cdr-chem"]
INPUTS = {"ddi": ["@DRUG$ increases the plasma concentration of @DRUG$ .", "No interaction was seen ."],
          "chemprot": ["@CHEMICAL$ inhibits @GENE$ in liver cells .", "The compound was given orally ."],
          "mqp": [("Can I take aspirin with ibuprofen?", "Is it safe to combine aspirin and ibuprofen?")],
          "bc5cdr-chem": ["Cisplatin and haloperidol induced nephrotoxicity in rats ."]}
pytestmark = pytest.mark.skipif(not Path(DATA, "DDI").is_dir(), reason="needs the real data in $MTBIO_DATA_DIR")


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder: str) -> Path:
    out = tmp_path_factory.mktemp("shipped")
    config = RunConfig(tasks=TASKS, data_dir=DATA, encoder=tiny_encoder, max_train_examples=16, epochs=1,
                       max_steps=2, batch_size=8, max_length=48, output=str(out / "run"), mixed_precision="no")
    run_dir, _ = refine(config)
    return run_dir


SCRIPT = """
import json, sys
from transformers import pipeline
out, task, inputs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if task == "bc5cdr-chem":
    nlp = pipeline("token-classification", model=out, aggregation_strategy="first")
    print(json.dumps([[(e["entity_group"], e["start"], e["end"], float(e["score"])) for e in nlp(t)] for t in inputs]))
else:
    nlp = pipeline("text-classification", model=out, top_k=None)
    items = [{"text": t[0], "text_pair": t[1]} if isinstance(t, list) else t for t in inputs]
    rows = [nlp(i) for i in items]
    print(json.dumps([{r["label"]: r["score"] for r in (row[0] if isinstance(row[0], list) else row)} for row in rows]))
assert "mtbio" not in sys.modules
"""


@pytest.mark.parametrize("task", TASKS)
def test_shipped_task_exports_and_pipeline_matches_mtbio_predict(shipped_run: Path, task: str,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / task
    result = CliRunner().invoke(cli.main, ["export", str(shipped_run), "--task", task, "--output", str(out)])
    assert result.exit_code == 0, result.output
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out), task, json.dumps(INPUTS[task])],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    run = __import__("mtbio").load(shipped_run)
    if task == "bc5cdr-chem":
        ours = [[[e["type"], e["start"], e["end"]] for e in spans] for spans in run.entities(task, INPUTS[task])]
        assert [[e[:3] for e in spans] for spans in theirs] == ours
    else:
        for (label, probs), scores in zip(run.predict(task, INPUTS[task], scores=True), theirs):
            assert max(scores, key=scores.get) == label and set(scores) == set(probs)
            assert all(abs(scores[name] - p) < 1e-4 for name, p in probs.items())
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    assert card.data.pipeline_tag and "mtbio" in card.data.tags and card.data.eval_results
    assert str(out) in card.text and ("text_pair" in card.text) == (task == "mqp")
    assert ('aggregation_strategy="first"' in card.text) == (task == "bc5cdr-chem")
    if task == "mqp":
        assert "1 similar, 0 dissimilar" in card.text and "derived" in card.text
