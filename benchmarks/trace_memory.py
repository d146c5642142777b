"""Where a training run's host memory goes, step by step: the batch, resident memory and glibc's heap.

Runs an `mtbio` command (default: the 4-task bf16 refine of bench_memory.py) in this process and, after every
optimizer step, records the step's last batch (task, shape), the resident set, and glibc's `mallinfo2`: heap in
use (live blocks), heap free (freed blocks glibc keeps), mapped blocks and the arena's size. Live data that grows
from step to step is a leak or a cache; free heap that grows is the allocator keeping what the longest batches
freed. Environment variables set before the run (`ONEDNN_PRIMITIVE_CACHE_CAPACITY`, `LRU_CACHE_CAPACITY`,
`MALLOC_MMAP_THRESHOLD_`, ...) are recorded with it. `--trim-every N` has glibc return its freed heap
(`malloc_trim`) after every Nth step, to see what holding it costs. Linux with glibc 2.33 or later.

    python benchmarks/trace_memory.py --name default
    LRU_CACHE_CAPACITY=1024 python benchmarks/trace_memory.py --name ideep-1024
    python benchmarks/trace_memory.py --name trim-every-1 --trim-every 1

Writes benchmarks/results/trace_memory-<name>.json.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import psutil

from common import glibc, glibc_heap, machine, offline_environment, write_result

offline_environment()

from mtbio.cli import main as mtbio_main  # noqa: E402
from mtbio.training import step_engine, trainer  # noqa: E402

ENVIRONMENT = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_ARENA_MAX",
               "LD_PRELOAD")


def traced(rows: list[dict[str, Any]], trim_every: int = 0) -> None:
    """Wrap the trainer so that each optimizer step appends its row to `rows` (after `malloc_trim(0)` every
    `trim_every` steps when asked)."""
    process = psutil.Process()
    collate, step_and_report = step_engine.StepEngine.collate, trainer.Trainer._step_and_report

    def collate_and_note(self: Any, task: str, part: Any, chunk: Any) -> Any:
        batch = collate(self, task, part, chunk)
        self.traced_batch = [task, list(batch["input_ids"].shape) if "input_ids" in batch else None]
        return batch

    def step_and_record(self: Any, micro: Any, bar: Any) -> None:
        step_and_report(self, micro, bar)
        if trim_every and self.state.global_step % trim_every == 0:
            glibc().malloc_trim(0)
        info = glibc_heap()
        rows.append({"step": self.state.global_step, "batch": self.engine.traced_batch,
                     "rss_mb": process.memory_info().rss / 2**20, "heap_in_use_mb": info.uordblks / 2**20,
                     "heap_free_mb": info.fordblks / 2**20, "mapped_mb": info.hblkhd / 2**20,
                     "arena_mb": info.arena / 2**20, "train_seconds": self.state.train_seconds})

    step_engine.StepEngine.collate = collate_and_note
    trainer.Trainer._step_and_report = step_and_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="result file suffix (the setting)")
    parser.add_argument("--data-dir", default=os.environ.get("MTBIO_DATA_DIR", "../shared/data"))
    parser.add_argument("--tasks", default="chemprot,ddi,bc5cdr-chem,bc5cdr-disease")
    parser.add_argument("--max-train-examples", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=250)
    parser.add_argument("--mixed-precision", default="bf16")
    parser.add_argument("--encoder", help="default: the recipe's (the packaged MiniLM)")
    parser.add_argument("--task-defs", action="append", default=[], help="further task definition folders")
    parser.add_argument("--results-dir", type=Path, default=None)
    parser.add_argument("--trim-every", type=int, default=0, help="malloc_trim(0) after every Nth step (0: never)")
    args = parser.parse_args()
    environment = {k: os.environ[k] for k in ENVIRONMENT if k in os.environ}
    rows: list[dict[str, Any]] = []
    traced(rows, args.trim_every)
    with tempfile.TemporaryDirectory() as tmp:
        mtbio_main(["-q", "refine", "--tasks", args.tasks, "--max-train-examples", str(args.max_train_examples),
                    "--max-steps", str(args.max_steps), "--recipe", "minilm", "--data-dir", args.data_dir,
                    "--mixed-precision", args.mixed_precision, "--output", os.path.join(tmp, "run"),
                    "--save-every", str(10 ** 9), "--eval-every", str(10 ** 9),
                    *(["--encoder", args.encoder] if args.encoder else []),
                    *[f"--task-defs={d}" for d in args.task_defs]], standalone_mode=False)
    path = write_result(f"trace_memory-{args.name}", {
        "machine": machine(), "environment": environment, "tasks": args.tasks,
        "max_train_examples": args.max_train_examples, "max_steps": args.max_steps,
        "mixed_precision": args.mixed_precision, "trim_every": args.trim_every,
        "steps": rows}, args.results_dir)
    last = rows[-1]
    print(f"{args.name}: RSS {last['rss_mb']:.0f} MB after step {last['step']} (peak after a step "
          f"{max(r['rss_mb'] for r in rows):.0f}), heap in use {rows[0]['heap_in_use_mb']:.0f} -> "
          f"{last['heap_in_use_mb']:.0f} MB, heap free {last['heap_free_mb']:.0f} MB; {path}")


if __name__ == "__main__":
    main()
