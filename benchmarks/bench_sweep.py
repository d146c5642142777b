"""A study-scale sweep's use of the machine: one seed of the pairwise graph of the four biomedical tasks
(2,000 training examples per task, the packaged MiniLM's recipe, bf16 where the CPU has it), timed end to end.

For each `--parallel` setting (N processes sharing the cores, or auto; the layout, processes × threads, is
recorded) the sweep runs in a fresh directory with a fresh feature cache, and
`mtbio.experiments.sweep_status.sweep_cost` reads its cells: wall time, useful FLOPs over wall time × the
matmul peak measured in this run (the efficiency; the peak is measured again after each setting), where the
cell time went (setup, train, evaluate, save, the rest), idle slot time, peak memory; and each cell's dev
score, so that settings can be checked to train the same models.

    python benchmarks/bench_sweep.py --data-dir ../shared/data --parallel 1,2,3

Writes benchmarks/results/bench_sweep[-NAME].json with the machine description. Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import machine, matmul_peaks, offline_environment, write_result

offline_environment()

from mtbio.experiments.layout import local_layout  # noqa: E402
from mtbio.experiments.sweep import cell_results, read_cells  # noqa: E402
from mtbio.experiments.sweep_status import sweep_cost  # noqa: E402


def run(parallel: str, args: argparse.Namespace, peaks: dict[str, float], workdir: Path) -> dict[str, Any]:
    output = workdir / f"parallel-{parallel}"
    command = [sys.executable, "-m", "mtbio", "-q", "pairwise", "--data-dir", str(args.data_dir), "--recipe",
               args.recipe, "--max-train-examples", str(args.max_train_examples), "--eval-every", str(10 ** 9),
               "--seeds", "1", "--parallel", str(parallel), "--output", str(output),
               *(["--tasks", args.tasks] if args.tasks else ["--domain", args.domain]),
               *[f"--task-defs={d}" for d in args.task_defs], *(["--encoder", args.encoder] if args.encoder else []),
               *(["--mixed-precision", args.mixed_precision] if args.mixed_precision else []), *args.extra]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True,
                          env=dict(os.environ, MTBIO_CACHE_DIR=str(workdir / f"cache-{parallel}")))
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"--parallel {parallel}: the sweep failed\n{done.stderr[-3000:]}")
    cells = read_cells(output)
    cost = sweep_cost(cells, peak=lambda precision: peaks[precision])
    assert cost is not None
    dev = {cell.run_dir.relative_to(output).as_posix(): cell_results(cell)["dev"] for cell in cells}
    layout = local_layout(parallel if parallel == "auto" else int(parallel), len(cells))
    return {"parallel": parallel, "processes": layout.processes, "threads_each": layout.threads,
            "command_wall_seconds": wall, **cost, "dev": dev}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--domain", default="biomedical")
    parser.add_argument("--tasks", help="a task list instead of --domain")
    parser.add_argument("--task-defs", action="append", default=[])
    parser.add_argument("--encoder")
    parser.add_argument("--recipe", default="minilm")
    parser.add_argument("--max-train-examples", type=int, default=2000)
    parser.add_argument("--mixed-precision", help="default: bf16 where the CPU has it, else no")
    parser.add_argument("--parallel", default="auto", help="comma-separated --parallel settings (N or auto), each a "
                        "sweep")
    parser.add_argument("--name", default="", help="suffix of the result file (before/after tags)")
    parser.add_argument("--results-dir", type=Path)
    parser.add_argument("extra", nargs="*", help="further pairwise options, after --")
    args = parser.parse_args()
    info = machine()
    if args.mixed_precision is None:
        args.mixed_precision = "bf16" if info["cpu_bf16"] else "no"
    peaks = matmul_peaks()
    result: dict[str, Any] = {"machine": info, "matmul_peak_flops_per_second": peaks, "domain": args.domain,
                              "tasks": args.tasks, "max_train_examples": args.max_train_examples,
                              "mixed_precision": args.mixed_precision, "recipe": args.recipe, "runs": []}
    name = "bench_sweep" + (f"-{args.name}" if args.name else "")
    with tempfile.TemporaryDirectory() as tmp:
        for parallel in args.parallel.split(","):
            entry = run(parallel, args, peaks, Path(tmp))
            entry["matmul_peak_after"] = matmul_peaks()  # a shared machine's peak drifts: the spread, recorded
            result["runs"].append(entry)
            print(f"--parallel {parallel}: {entry['wall_seconds']:.0f} s wall, efficiency {entry['efficiency']:.1%}, "
                  f"cell time {', '.join(f'{k} {v:.0f} s' for k, v in entry['phase_seconds'].items())}, idle "
                  f"{entry['idle_slot_seconds']:.0f} s, peak {entry['peak_rss_mb']:.0f} MB", flush=True)
            write_result(name, result, args.results_dir)


if __name__ == "__main__":
    main()
