"""Dev-set scoring in bf16 against fp32, on trained runs: speed and score differences.

For each run directory given (a trained single-task or multi-task run; every task of the run is
scored), the dev split is tokenized once, then scored by mtbio's batched, length-sorted inference
(`predict_split`, what `evaluate` and in-training evaluation use) at each eval batch size in
`--batch-sizes`, in fp32 and in bf16 autocast, alternating (fp32, bf16, fp32, bf16, ... `--repeats`
times). Reported per task and overall: examples/s of each precision (median), the bf16/fp32 ratio
at the fp32 side's best batch size, and the primary metric of both with their difference.

    python benchmarks/bench_eval_precision.py --data-dir ../shared/data \
        --run examples/pairwise_biomedical/baselines/chemprot/seed-42 --run ...

Writes benchmarks/results/bench_eval_precision.json and prints one line per task and a summary.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import machine, offline_environment, write_result

offline_environment()

import mtbio  # noqa: E402
from mtbio.data.pipeline import load_task_split  # noqa: E402
from mtbio.evaluation.metrics import score_task  # noqa: E402
from mtbio.model.inference import autocast_for, bf16_supported, predict_split  # noqa: E402


def score_once(run: Any, name: str, data: Any, batch_size: int, bf16: bool) -> tuple[float, dict[str, float]]:
    """Seconds to predict the split, and its scores."""
    task = run.tasks[name]
    autocast = autocast_for("bf16" if bf16 else "no", "cpu")
    start = time.perf_counter()
    predictions = predict_split(run.model, name, data, int(run.tokenizer.pad_token_id or 0), batch_size,
                                autocast=autocast, progress=False)
    seconds = time.perf_counter() - start
    scores = score_task(task, [e.label for e in data.examples], predictions, [e.group for e in data.examples])
    return seconds, scores


def bench_task(run: Any, name: str, args: argparse.Namespace) -> dict[str, Any]:
    task = run.tasks[name]
    data = load_task_split(task, "dev", args.data_dir, run.tokenizer)
    result: dict[str, Any] = {"examples": len(data), "metric": task.metric, "batch_sizes": {}}
    for batch_size in args.batch_sizes:
        seconds: dict[str, list[float]] = {"fp32": [], "bf16": []}
        scores: dict[str, dict[str, float]] = {}
        for _ in range(args.repeats):
            for precision in ("fp32", "bf16"):
                elapsed, scores[precision] = score_once(run, name, data, batch_size, precision == "bf16")
                seconds[precision].append(elapsed)
        result["batch_sizes"][str(batch_size)] = {
            p: {"runs_seconds": seconds[p], "examples_per_second": len(data) / statistics.median(seconds[p]),
                "scores": scores[p]} for p in seconds}
    best = {p: max(result["batch_sizes"].values(), key=lambda r: r[p]["examples_per_second"])[p]
            for p in ("fp32", "bf16")}
    result.update(
        fp32_examples_per_second=best["fp32"]["examples_per_second"],
        bf16_examples_per_second=best["bf16"]["examples_per_second"],
        ratio=best["bf16"]["examples_per_second"] / best["fp32"]["examples_per_second"],
        fp32_score=best["fp32"]["scores"][task.metric], bf16_score=best["bf16"]["scores"][task.metric],
        score_difference=best["bf16"]["scores"][task.metric] - best["fp32"]["scores"][task.metric])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, type=Path, help="A trained run directory (repeatable).")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[64, 128, 256])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args()
    if not bf16_supported("cpu"):
        sys.exit("error: this CPU has no bf16 support (AVX512-BF16/AMX); nothing to compare")
    tasks: dict[str, Any] = {}
    for run_dir in args.run:
        run = mtbio.load(run_dir)
        for name in run.tasks:
            result = bench_task(run, name, args)
            tasks[f"{name} ({run_dir})"] = result
            print(f"{name}: fp32 {result['fp32_examples_per_second']:.1f} ex/s, bf16 {result['bf16_examples_per_second']:.1f}"
                  f" ex/s (x{result['ratio']:.2f}); {result['metric']} {result['fp32_score']:.4f} vs "
                  f"{result['bf16_score']:.4f} ({result['score_difference']:+.4f})", flush=True)
    fp32 = sum(t["examples"] for t in tasks.values()) / sum(t["examples"] / t["fp32_examples_per_second"] for t in tasks.values())
    bf16 = sum(t["examples"] for t in tasks.values()) / sum(t["examples"] / t["bf16_examples_per_second"] for t in tasks.values())
    overall = {"fp32_examples_per_second": fp32, "bf16_examples_per_second": bf16, "ratio": bf16 / fp32,
               "max_abs_score_difference": max(abs(t["score_difference"]) for t in tasks.values())}
    target = write_result("bench_eval_precision", {"tasks": tasks, "overall": overall, "repeats": args.repeats,
                                                   "machine": machine()}, args.results_dir)
    print(f"dev scoring: bf16/fp32 x{overall['ratio']:.2f} ({fp32:.1f} -> {bf16:.1f} ex/s); largest score difference "
          f"{overall['max_abs_score_difference']:.4f} -> {target}")


if __name__ == "__main__":
    main()
