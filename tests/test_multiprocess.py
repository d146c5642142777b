"""Two training processes through `accelerate launch --config_file examples/accelerate/ddp.yaml`
(gloo on CPU) on a small slice of real data.

Checks that every rank runs the same task at every step on its own half of the batch, that the
result (dev scores too) equals a single-process run with the same global batch, that each rank
scores about half of the dev set, and that the run directory is written once. Dropout is off (tiny encoder and task heads), so the two runs are comparable.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mtbio.experiments.refine import refine
from mtbio.training.config import RunConfig
from mtbio.training.distributed import TASK_LOG_ENV

REPO = Path(__file__).resolve().parents[1]
# Classification tasks only: their losses are means over examples, so the average of two equal
# half-batch gradients is the full-batch gradient (a tagging loss averages over tokens, whose
# count differs between the halves).
TASKS = {"ddi": "ddi0", "chemprot": "chemprot0"}
OPTIONS = dict(max_train_examples=64, batch_size=8, max_steps=8, max_length=64, seed=1, eval_every=4, save_every=4,
               sub_batches=2)  # each rank runs its half as 2 parts: only the last backward all-reduces


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _task_log(path: Path) -> list[tuple[int, str, list[str]]]:
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    return [(int(step), task, uids.split(",")) for step, task, uids in rows]


def test_two_processes_match_one(tmp_path: Path, data_dir: Path, tiny_encoder_no_dropout: str,
                                 task_defs_without_dropout, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("accelerate", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the accelerate command is not installed beside this Python")
    defs = task_defs_without_dropout(TASKS)
    common = dict(tasks=list(TASKS.values()), task_defs=[str(defs)], data_dir=str(data_dir),
                  encoder=tiny_encoder_no_dropout, **OPTIONS)

    monkeypatch.setenv(TASK_LOG_ENV, str(tmp_path / "single"))
    single_dir, single = refine(RunConfig(output=str(tmp_path / "one"), **common))
    monkeypatch.delenv(TASK_LOG_ENV)

    flags = []
    for key, value in OPTIONS.items():
        flags += [f"--{key.replace('_', '-')}", str(value)]
    # the shipped example config (DDP; without GPUs its processes run on CPU over gloo)
    command = [str(Path(sys.executable).parent / "accelerate"), "launch", "--config_file",
               str(REPO / "examples" / "accelerate" / "ddp.yaml"), "--main_process_port", str(_free_port()),
               "-m", "mtbio", "refine", "--tasks", ",".join(TASKS.values()),
               "--task-defs", str(defs), "--data-dir", str(data_dir), "--encoder", tiny_encoder_no_dropout,
               "--output", str(tmp_path / "two"), *flags]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               **{TASK_LOG_ENV: str(tmp_path / "multi")})
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stdout.count("refine run:") == 1  # printed by the main process only

    # the same task at every step on both ranks, each on its own half of the global batch
    rank0, rank1 = _task_log(tmp_path / "multi.rank0"), _task_log(tmp_path / "multi.rank1")
    one = _task_log(tmp_path / "single.rank0")
    assert [(s, t) for s, t, _ in rank0] == [(s, t) for s, t, _ in rank1] == [(s, t) for s, t, _ in one]
    assert len(rank0) == OPTIONS["max_steps"]
    for (_, _, a), (_, _, b), (_, _, full) in zip(rank0, rank1, one):
        assert len(a) == len(b) == len(full) // 2 and not set(a) & set(b) and a + b == full

    # the same weights, dev history and results as one process with the same global batch
    two_dir = tmp_path / "two"
    for step in (4, 8):
        a = load_file(str(single_dir / "checkpoints" / f"step-{step:08d}" / "model.safetensors"))
        b = load_file(str(two_dir / "checkpoints" / f"step-{step:08d}" / "model.safetensors"))
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5, msg=f"{key} at step {step}")
    history = [r for r in map(json.loads, (two_dir / "metrics.jsonl").read_text().splitlines()) if r["split"] == "dev"]
    assert [r["step"] for r in history] == [4, 8]  # one line per evaluation: written by one process
    expected = [r for r in map(json.loads, (single_dir / "metrics.jsonl").read_text().splitlines()) if r["split"] == "dev"]
    for got, want in zip(history, expected):
        for task, scores in want["scores"].items():
            assert got["scores"][task] == pytest.approx(scores, abs=1e-6)
    results = json.loads((two_dir / "results.json").read_text())
    assert results["best_step"] == single["best_step"] and results["steps"] == 8
    # evaluation is sharded: each process scored about half of the dev set, together all of it once
    dev_size = single["examples_scored_per_process"]["dev"]
    shares = results["examples_scored_per_process"]["dev"]
    assert len(dev_size) == 1 and len(shares) == 2 and sum(shares) == dev_size[0]
    assert all(abs(share - dev_size[0] / 2) <= 0.05 * dev_size[0] for share in shares), shares
    for task, scores in single["dev"].items():
        assert results["dev"][task] == pytest.approx(scores, abs=1e-6)
    assert sorted(p.name for p in (two_dir / "checkpoints").iterdir()) == ["step-00000004", "step-00000008"]
    assert not [p for p in two_dir.rglob("*") if p.name.endswith((".tmp", ".old")) or p.name.startswith(".tmp")]


def test_every_command_shuts_down_its_process_group_on_success_and_on_error(tmp_path: Path) -> None:
    """Left to interpreter exit, gloo's threads can abort a launched process; the CLI ends the group itself."""
    import torch.distributed as dist
    from click.testing import CliRunner

    from mtbio.cli import main

    data = REPO / "mtbio" / "sample_data"
    for args, status in ((["tasks", "list", "--data-dir", str(data)], 0),
                         (["tasks", "list", "--data-dir", str(tmp_path / "missing")], 2)):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}-{status}", rank=0, world_size=1)
        result = CliRunner().invoke(main, args)
        assert result.exit_code == status, result.output
        assert not dist.is_initialized()
