"""Several tasks predicted on the same inputs: one encoder pass shared by every head against one pass per task.

A joint run on tasks that read one sentence (default BC5CDR-chem and BC5CDR-disease, tagging, and HoC,
multi-label) is made cheaply (`refine`, one optimizer step: throughput only). The inputs are BC5CDR-chem's dev
sentences as raw text. Timed from raw text to decoded predictions, alternating the two sides `--repeats` times:

- per task: `run.predict(task, texts)` for each task in turn (one encoder pass per task);
- shared: `run.predict([tasks...], texts)` (the tasks whose inputs tokenize alike share one pass).

The predictions of both sides are compared (they must be equal). Medians and the ratio per task → shared.
With `--adapter lora` every task has a LoRA adapter of its own: per task runs through each adapter in turn; shared
stacks one copy of the rows per adapter into one call (PEFT's mixed-adapter batches), the same arithmetic.

    python benchmarks/bench_predict_many.py --data-dir ../shared/data [--adapter lora]

Writes benchmarks/results/bench_predict_many.json (with LoRA: bench_predict_many_lora.json).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import add_common_arguments, machine, offline_environment, write_result

offline_environment()

import mtbio  # noqa: E402
from mtbio.data.loading import read_split  # noqa: E402
from mtbio.experiments.refine import refine  # noqa: E402
from mtbio.tasks.loading import load_catalog  # noqa: E402
from mtbio.training.config import RunConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--tasks", default="bc5cdr-chem,bc5cdr-disease,hoc")
    parser.add_argument("--inputs", type=int, default=1000, help="Dev sentences of the first task to predict on.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--adapter", choices=["none", "lora"], default="none")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    catalog = load_catalog([str(d) for d in args.task_defs])
    first = catalog.get(tasks[0])
    texts = [" ".join(e.tokens) for e in read_split(first, "dev", args.data_dir, args.inputs)]
    with tempfile.TemporaryDirectory() as workdir:
        config = RunConfig(tasks=tasks, data_dir=str(args.data_dir), encoder=args.encoder, max_steps=1,
                           max_train_examples=64, max_eval_examples=16, baselines=False, lp_ft=False,
                           adapter=args.adapter,
                           output=str(Path(workdir) / "run"), task_defs=[str(d) for d in args.task_defs])
        run_dir, _ = refine(config)
        run = mtbio.load(run_dir, precision="no" if args.mixed_precision == "no" else "bf16")
        timings: dict[str, list[float]] = {"per_task": [], "shared": []}
        for _ in range(args.repeats):
            started = time.perf_counter()
            separate = {task: run.predict(task, texts) for task in tasks}
            timings["per_task"].append(time.perf_counter() - started)
            started = time.perf_counter()
            together = run.predict(tasks, texts)
            timings["shared"].append(time.perf_counter() - started)
        same = all(record[task] == separate[task][i] for i, record in enumerate(together) for task in tasks)
    median = {side: statistics.median(values) for side, values in timings.items()}
    result = {"machine": machine(), "tasks": tasks, "inputs": len(texts), "repeats": args.repeats,
              "encoder": args.encoder or "packaged MiniLM-L6", "mixed_precision": args.mixed_precision,
              "adapter": args.adapter,
              "seconds": timings, "median_seconds": median, "same_predictions": same,
              "inputs_per_second": {side: len(texts) / s for side, s in median.items()},
              "speedup_shared_over_per_task": median["per_task"] / median["shared"]}
    name = "bench_predict_many" + ("_lora" if args.adapter == "lora" else "")
    path = write_result(name, result, args.results_dir)
    print(f"{len(tasks)} tasks on {len(texts)} inputs: per task {median['per_task']:.2f} s, shared "
          f"{median['shared']:.2f} s (x{result['speedup_shared_over_per_task']:.2f}); same predictions: {same}; "
          f"written: {path}")


if __name__ == "__main__":
    main()
