"""Kill-and-resume on the surfaces today's changes touch (issue 91's "nothing else regresses"): the small-data recipe
(LP-FT start, fitted thresholds, --pair-form auto, the data fingerprint checked on --resume) with `--select per-task`
(each task's own best weights in best/<task>/) ends with the same weights, bit for bit, and the same dev history as
an uninterrupted run. One run holds both surfaces; it is also the default suite's kill-and-resume of a full refine
(tests/test_training.py's `full` case runs under -m long)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_training import _dev_history, _final_weights, _train_command

STAGE = ("refine", "--tasks", "demo-ner,demo-relation")


def _kill_after_checkpoint(command: list[str], checkpoint: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and not checkpoint.exists():
        time.sleep(0.02)
    proc.kill()
    proc.wait()


def test_a_killed_run_resumes_to_bit_identical_weights(tmp_path: Path, tiny_encoder: str) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    options = ("--eval-every", "4", "--recipe", "minilm", "--select", "per-task")
    subprocess.run(_train_command(tmp_path / "straight", tiny_encoder, STAGE, *options), check=True, env=env,
                   capture_output=True)
    interrupted = tmp_path / "interrupted"
    _kill_after_checkpoint(_train_command(interrupted, tiny_encoder, STAGE, *options),
                           interrupted / "checkpoints" / "step-00000006" / "manifest.json", env)
    assert not (interrupted / "results.json").exists(), "the run finished before it was killed"
    resumed = subprocess.run(_train_command(interrupted, tiny_encoder, STAGE, *options, "--resume"), env=env,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = _final_weights(tmp_path / "straight"), _final_weights(interrupted)
    assert set(a) == set(b)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]
    first, second = (json.loads((d / "results.json").read_text()) for d in (tmp_path / "straight", interrupted))
    assert first["dev"] == second["dev"] and first["best_step"] == second["best_step"]
    assert first["lp_start"] == second["lp_start"] != []  # the recipe's LP-FT start ran
    history = _dev_history(tmp_path / "straight")
    assert [step for step, _ in history] == [0, 4, 8, 12] and _dev_history(interrupted) == history  # 0: the start
    for task in ("demo-ner", "demo-relation"):  # each task's own best weights, kept apart from the joint ones
        kept = [load_file(str(d / "best" / task / "encoder" / "model.safetensors"))
                for d in (tmp_path / "straight", interrupted)]
        assert set(kept[0]) == set(kept[1]) and all(torch.equal(kept[0][k], kept[1][k]) for k in kept[0])
