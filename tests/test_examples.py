"""The scripts in examples/ run end to end (in a tiny mode: tiny encoder, demo data, few steps)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from mtbio.experiments.demo import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]


def test_stabilization_bioasq_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    report = tmp_path / "table.md"
    env = dict(os.environ, TASK="demo-nli", DATA_DIR=str(SAMPLE_DIR), ENCODER=tiny_encoder, SEEDS="2",
               OUT=str(tmp_path / "runs"), REPORT=str(report), FREEZE="1", REINIT="1",
               TRAIN_ARGS=f"--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 24 "
                          f"--task-defs {SAMPLE_DIR / 'task_defs'}",
               MTBIO=str(Path(sys.executable).parent / "mtbio"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(["bash", str(REPO / "examples" / "stabilization_bioasq.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    text = report.read_text()
    assert "| type | task (metric) | standard | freeze | layerwise-decay | reinit |" in text
    row = next(line for line in text.splitlines() if line.startswith("| NLI | demo-nli (accuracy) |"))
    assert row.count("±") == 4
    assert "--freeze-layers 1" in text and "--layerwise-lr-decay 0.8" in text and "--reinit-layers 1" in text
    assert report.with_suffix(".csv").is_file()
    for name, key, value in (("freeze", "freeze_layers", 1), ("layerwise-decay", "layerwise_lr_decay", 0.8),
                             ("reinit", "reinit_layers", 1), ("standard", "freeze_layers", None)):
        for seed in (42, 43):
            config = yaml.safe_load((tmp_path / "runs" / name / "demo-nli" / f"seed-{seed}" / "config.yaml").read_text())
            assert config[key] == value and config["seed"] == seed


def test_mtbert_biomedical_script_in_tiny_mode(tmp_path: Path, tiny_encoder: str) -> None:
    env = dict(os.environ, TASKS="demo-relation,demo-ner", DATA_DIR=str(SAMPLE_DIR), ENCODER=tiny_encoder,
               OUT=str(tmp_path / "runs"),
               TRAIN_ARGS=f"--max-steps 2 --max-length 32 --batch-size 8 --max-train-examples 16 "
                          f"--task-defs {SAMPLE_DIR / 'task_defs'}",
               MTBIO=str(Path(sys.executable).parent / "mtbio"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(["bash", str(REPO / "examples" / "mtbert_biomedical.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("run "))
    assert "demo-relation" in header and "demo-ner" in header
    stages = [line.split()[1] for line in lines if line.startswith(str(tmp_path / "runs"))]
    assert stages == ["single-task", "refinement", "fine-tune"]
    assert (tmp_path / "runs" / "table-dev.json").is_file()
