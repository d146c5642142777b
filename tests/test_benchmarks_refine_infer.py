"""benchmarks/bench_refine.py, bench_infer.py, bench_predict_many.py and bench_long.py end to end in a tiny mode
(packaged demo tasks, a tiny random BERT; bench_long its own tiny ModernBERT), and the FLOP count of
benchmarks/common.py against a hand computation."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mtbio.experiments.demo import SAMPLE_DIR

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run_benchmark(script: str, results_dir: Path, encoder: str, *args: str) -> dict[str, Any]:
    """Run a benchmark script on the demo tasks; return its JSON result."""
    command = [sys.executable, str(BENCHMARKS / script), "--data-dir", str(SAMPLE_DIR),
               "--task-defs", str(SAMPLE_DIR / "task_defs"), "--encoder", encoder, "--peak-seconds", "0.1",
               "--results-dir", str(results_dir), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert str(results_dir) in done.stdout  # the one-line summary names the result file
    return json.loads((results_dir / f"{Path(script).stem}.json").read_text())


def assert_efficiency(block: dict[str, Any]) -> None:
    assert block["useful_flops"] > 0 and block["peak_flops_per_second"] > 0
    assert 0 < block["fraction_of_peak"] < 1


def test_flops_per_sequence_matches_a_hand_count() -> None:
    from mtbio.training.flops import flops_per_sequence, total_flops

    config = SimpleNamespace(hidden_size=4, num_hidden_layers=1, intermediate_size=8)
    # dense weights 1·(4·4² + 2·4·8) = 128; forward 2·128·2 + 1·4·2²·4 = 512 + 64
    assert flops_per_sequence(config, 2, training=False) == 576
    assert flops_per_sequence(config, 2, training=True) == 3 * 576
    assert total_flops(config, [2, 3], training=False) == 576 + 2 * 128 * 3 + 4 * 9 * 4


def test_bench_refine_tiny(tmp_path: Path, tiny_encoder: str) -> None:
    result = run_benchmark("bench_refine.py", tmp_path, tiny_encoder, "--tasks", "demo-ner,demo-relation,demo-nli",
                           "--max-steps", "3")
    assert result["tasks"] == ["demo-ner", "demo-relation", "demo-nli"] and result["steps"] == 3
    assert 0 < result["train_examples"] <= 3 * 32 and result["train_real_tokens"] > result["train_examples"]
    assert result["train_examples_per_second"] > 0 and result["train_tokens_per_second"] > 0
    assert result["precision"] == "fp32"
    assert_efficiency(result)
    pad = result["padding"]
    assert pad["examples"] == 900 and pad["batches"] == 30  # one epoch: 3 tasks × 300 examples, batch 32
    fractions = [pad["padded_fraction"], pad["padded_fraction_as_collated"], pad["random_batches_padded_fraction"],
                 pad["pad_to_max_length_fraction"], *pad["padded_fraction_per_task"].values()]
    assert all(0 <= f <= 1 for f in fractions)
    assert set(pad["padded_fraction_per_task"]) == {"demo-ner", "demo-relation", "demo-nli"}
    assert pad["padded_fraction"] <= pad["random_batches_padded_fraction"] <= pad["pad_to_max_length_fraction"]
    assert result["acceptance"]["met"] == (pad["padded_fraction"] <= 0.10)
    assert result["peak_memory_mb"] > 0 and result["machine"]["cores"] >= 1 and "torch" in result["machine"]


def test_bench_infer_tiny(tmp_path: Path, tiny_encoder: str) -> None:
    result = run_benchmark("bench_infer.py", tmp_path, tiny_encoder, "--tasks", "demo-ner,demo-relation",
                           "--max-examples", "40")
    assert set(result["tasks"]) == {"demo-ner", "demo-relation"}
    for task in result["tasks"].values():
        assert task["one_prediction_per_input"] and task["ratio"] > 0
        for side in ("mtbio", "trainer"):
            assert task[side]["examples"] == 40 and len(task[side]["runs_seconds"]) == 2
            assert task[side]["examples_per_second"] > 0 and task[side]["real_tokens_per_second"] > 0
            assert_efficiency(task[side])
        # same inputs, same tokenizer, same truncation: the same real tokens on both sides
        assert task["mtbio"]["real_tokens"] == task["trainer"]["real_tokens"]
    overall = result["overall"]
    assert overall["ratio"] > 0 and overall["mtbio"]["examples"] == 80
    assert_efficiency(overall["mtbio"])
    assert result["peak_memory_mb"] > 0 and result["machine"]["cores"] >= 1 and "torch" in result["machine"]



def test_bench_predict_many_tiny(tmp_path: Path, tiny_encoder: str) -> None:
    """Two demo tasks on the same sentences: the shared pass gives the per-task predictions."""
    result = run_benchmark("bench_predict_many.py", tmp_path, tiny_encoder, "--tasks", "demo-ner,demo-hoc",
                           "--inputs", "20", "--repeats", "1")
    assert result["tasks"] == ["demo-ner", "demo-hoc"] and result["inputs"] == 20 and result["same_predictions"]
    assert result["speedup_shared_over_per_task"] > 0 and len(result["seconds"]["shared"]) == 1


def test_bench_long_tiny(tmp_path: Path) -> None:
    """bench_long.py at a short length: a peak memory per command and attention implementation, from child processes."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_long.py"), "--lengths", "64", "--impls", "sdpa",
                           "--results-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "bench_long.json").read_text())["rows"]
    assert [(r["tokens"], r["attention"]) for r in rows] == [(64, "sdpa")]
    assert rows[0]["finetune_peak_mb"] > 100 and rows[0]["predict_peak_mb"] > 100
