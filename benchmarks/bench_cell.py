"""What one small-data cell costs, by phase: a `mtbio finetune` of one task at a training size, run in this
process with a timer around each phase (exclusive time: a phase nested in another is not counted twice).

Phases: setup (tokenizer, encoder, heads, the pair-form probe), data (reading and featurizing), lp_ft (the heads'
fit on frozen features), baselines (the no-training baselines), training (the optimizer steps), evaluations (dev,
the start's included), saving (best weights and checkpoints), other (the rest of the command).

Each `--arm NAME='OPTIONS'` is one cell configuration; the arms alternate seed by seed in one process so their
ratio is measured under the same load. The JSON names the CPU; compare arms only inside one file.

    python benchmarks/bench_cell.py --tasks bc5cdr-disease --size 100 --seeds 42 \\
        --arm recipe='--recipe minilm' --arm cheap='--recipe minilm --max-epochs 20 --evaluations 5'
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

from common import RESULTS, machine, offline_environment, write_result  # type: ignore[import-not-found]

offline_environment()

PHASES = {  # phase → (module, attribute) wrapped by the timer
    "setup": [("mtbio.experiments.training_run", "load_encoder"), ("mtbio.experiments.training_run", "load_tokenizer"),
              ("mtbio.experiments.training_run", "resolve_pair_forms"), ("mtbio.experiments.training_run", "build_heads")],
    "data": [("mtbio.experiments.training_run", "load_task_data")],
    "lp_ft": [("mtbio.experiments.training_run", "fit_heads")],
    "baselines": [("mtbio.experiments.training_run", "_floors")],
    "training": [("mtbio.training.trainer.Trainer", "train")],
    "evaluations": [("mtbio.training.trainer.Trainer", "evaluate")],
    "saving": [("mtbio.experiments.training_run", "save_model"), ("mtbio.training.trainer", "save_checkpoint")],
}


class PhaseTimer:
    """Exclusive seconds per phase: entering a phase pauses the one it is nested in."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.perf_counter()
        if self.stack:
            outer, since = self.stack[-1]
            self.seconds[outer] += now - since
        self.stack.append((name, now))
        try:
            yield
        finally:
            _, since = self.stack.pop()
            now = time.perf_counter()
            self.seconds[name] += now - since
            if self.stack:
                self.stack[-1] = (self.stack[-1][0], now)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name):
                return fn(*args, **kwargs)
        return timed


def _target(path: str) -> Any:
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


@contextlib.contextmanager
def instrumented(timer: PhaseTimer) -> Iterator[None]:
    undo = []
    for name, places in PHASES.items():
        for owner_path, attr in places:
            owner = _target(owner_path)
            if not hasattr(owner, attr):
                continue
            original = getattr(owner, attr)
            setattr(owner, attr, timer.wrap(name, original))
            undo.append((owner, attr, original))
    try:
        yield
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def run_cell(task: str, size: int, seed: int, options: str, data_dir: str, out: Path) -> dict[str, Any]:
    """One cell through the CLI's own code path; its phases and its results.json's scores."""
    from click.testing import CliRunner

    from mtbio.cli import main

    timer = PhaseTimer()
    args = ["finetune", "--task", task, "--data-dir", data_dir, "--max-train-examples", str(size), "--seed", str(seed),
            "--output", str(out), *shlex.split(options)]
    started = time.perf_counter()
    with instrumented(timer), timer.phase("other"):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"cell failed ({result.exit_code}): {result.output[-2000:]}")
    results = json.loads((out / task / "results.json").read_text())
    metric = next(iter(results["dev"][task]))
    return {"seed": seed, "wall_seconds": round(wall, 2),
            "phases": {k: round(v, 2) for k, v in sorted(timer.seconds.items())},
            "steps": results["steps"], "best_step": results["best_step"], "train_examples": results["train_examples"],
            "dev": results["dev"][task][metric], "metric": metric}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="bc5cdr-disease", help="comma-separated; each runs every arm and seed")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--arm", action="append", required=True, help="NAME='finetune options'")
    parser.add_argument("--common", default="", help="finetune options every arm takes (--task-defs DIR ...)")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", default=None, help="result name under benchmarks/results/ (default bench_cell-SIZE)")
    parser.add_argument("--resume", action="store_true", help="keep the cells already in the result file")
    args = parser.parse_args()
    arms = dict(a.split("=", 1) for a in args.arm)
    tasks = args.tasks.split(",")
    name_of = args.output or f"bench_cell-{args.size}"
    target = RESULTS / f"{name_of}.json"
    kept = json.loads(target.read_text()) if args.resume and target.exists() else {"cells": {}, "arms": {}}
    done = kept["cells"]
    tasks_all = list(dict.fromkeys([*done, *tasks]))  # --resume keeps the file's other tasks and arms too
    arms_all = {**kept["arms"], **arms}
    cells: dict[str, dict[str, list[dict[str, Any]]]] = {
        task: {arm: list(done.get(task, {}).get(arm, [])) for arm in arms_all} for task in tasks_all}
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            for seed in (int(s) for s in args.seeds.split(",")):
                for arm, options in arms.items():
                    if any(c["seed"] == seed for c in cells[task][arm]):
                        continue  # --resume: kept from the file
                    cell = run_cell(task, args.size, seed, f"{args.common} {options}", args.data_dir,
                                    Path(tmp) / f"{task}-{arm}-{seed}")
                    cells[task][arm].append(cell)
                    print(task, arm, cell, flush=True)
                    write_result(name_of, summarize(args, arms_all, tasks_all, cells))  # a kill loses one cell
    result = summarize(args, arms_all, tasks_all, cells)
    write_result(name_of, result)
    print(result["mean_wall_seconds"], result["cost_ratio_vs_first"])


def summarize(args: argparse.Namespace, arms: dict[str, str], tasks: list[str],
              cells: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """The result file: every cell, and per arm its mean wall time, mean phases and cost ratio to the first arm."""
    walls = {arm: [c["wall_seconds"] for task in tasks for c in cells[task][arm]] for arm in arms}
    mean = {arm: sum(w) / len(w) for arm, w in walls.items() if w}
    phases = {arm: {phase: round(sum(c["phases"].get(phase, 0.0) for task in tasks for c in cells[task][arm])
                                 / len(walls[arm]), 2) for phase in [*PHASES, "other"]} for arm in mean}
    first = next(iter(arms))
    return {"question": "what a small-data cell costs by phase, and each arm's cost against the first arm's",
            "tasks": tasks, "size": args.size, "seeds": args.seeds, "common": args.common, "arms": arms,
            "cells": cells, "mean_wall_seconds": {k: round(v, 2) for k, v in mean.items()},
            "mean_phase_seconds": phases,
            "cost_ratio_vs_first": {k: round(mean[first] / v, 3) for k, v in mean.items()} if first in mean else {},
            "machine": machine()}


if __name__ == "__main__":
    main()
