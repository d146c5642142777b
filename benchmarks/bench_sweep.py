"""A study-scale sweep's use of the machine: one seed of the pairwise graph of the four biomedical tasks
(2,000 training examples per task, the packaged MiniLM's recipe, bf16 where the CPU has it), timed end to end.

For each `--parallel` setting (N processes sharing the cores, or auto; the layout, processes × threads, is
recorded) the sweep runs in a fresh directory with a fresh feature cache, and
`mtbio.experiments.sweep_status.sweep_cost` reads its cells: wall time, useful FLOPs over wall time × the
matmul peak measured in this run (the efficiency; the peak is measured again after each setting), where the
cell time went (setup, train, evaluate, save, the rest), idle slot time, peak memory; and each cell's dev
score, so that settings can be checked to train the same models.

    python benchmarks/bench_sweep.py --data-dir ../shared/data --parallel 1,2,3

Before and after a change, back to back: `--baseline-python` names the interpreter of an environment where the
older mtbio is installed (a clone at the older commit, `pip install -e`); its sweep runs first, at
`--baseline-parallel` processes. An older mtbio may not record a cell's cost, so both sides are also compared by
the command's wall time: the same cells' useful FLOPs (counted by this code's run) over the command's wall time
× the peak. The largest difference between the two sides' dev scores, over every cell and metric, is recorded.

    python benchmarks/bench_sweep.py --data-dir ../shared/data --parallel auto \
        --baseline-python ../before/venv/bin/python --baseline-parallel 3 --name before-after

On a GPU, `--parallel N` puts N cells on the one device at a time; each setting records the cells' trained
examples over its wall time (aggregate examples/s) and the device's utilisation sampled from nvidia-smi while it
runs, and with a `--parallel 1` setting beside, every other setting's throughput against one cell at a time:

    python benchmarks/bench_sweep.py --data-dir ../shared/data --tasks chemprot,ddi --parallel 1,4 \
        --max-train-examples 2000 --mixed-precision bf16

Writes benchmarks/results/bench_sweep[-NAME].json with the machine description. Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from common import highest_peaks, machine, matmul_peaks, offline_environment, write_result

offline_environment()

from mtbio.experiments.layout import local_layout  # noqa: E402
from mtbio.experiments.sweep import cell_results, read_cells  # noqa: E402
from mtbio.experiments.sweep_status import sweep_cost  # noqa: E402


def code_of(python: str, workdir: Path) -> dict[str, str]:
    """Where an interpreter's mtbio lives and, from git, at which commit."""
    where = subprocess.run([python, "-c", "import mtbio, pathlib; print(pathlib.Path(mtbio.__file__).parent)"],
                           capture_output=True, text=True, check=True, cwd=workdir).stdout.strip()
    commit = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"python": python, "mtbio": where, "commit": commit or "unknown"}


def largest_dev_difference(one: dict[str, Any], other: dict[str, Any]) -> float:
    """The largest absolute difference of a dev score between two runs' cells, over the cells and metrics both have."""
    differences = [abs(float(one[cell][task][metric]) - float(other[cell][task][metric]))
                   for cell in one.keys() & other.keys() for task in one[cell].keys() & other[cell].keys()
                   for metric in one[cell][task].keys() & other[cell][task].keys()]
    return max(differences, default=float("nan"))


class UtilisationSampler:
    """The GPU's utilisation (percent of time a kernel ran, as nvidia-smi reports it), sampled every `interval`
    seconds while the `with` block runs; on a machine without nvidia-smi or CUDA, no samples and a note saying so."""

    def __init__(self, interval: float = 0.5):
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.source = "nvidia-smi" if shutil.which("nvidia-smi") else (
            "torch.cuda.utilization" if torch.cuda.is_available() else None)

    def _read(self) -> float | None:
        if self.source == "nvidia-smi":
            done = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True)
            first = done.stdout.split("\n", 1)[0].strip()
            return float(first) if done.returncode == 0 and first.replace(".", "", 1).isdigit() else None
        return float(torch.cuda.utilization())

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            value = self._read()
            if value is not None:
                self.samples.append(value)

    def __enter__(self) -> "UtilisationSampler":
        if self.source:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.source:
            self._thread.join()

    def summary(self) -> dict[str, Any]:
        if not self.source:
            return {"utilisation": "no CUDA device"}
        mean = sum(self.samples) / len(self.samples) if self.samples else float("nan")
        return {"utilisation_source": self.source, "utilisation_samples": len(self.samples),
                "mean_utilisation_percent": mean}


def run(parallel: str, args: argparse.Namespace, peaks: dict[str, float], workdir: Path,
        baseline: str | None = None) -> dict[str, Any]:
    """One sweep at `--parallel parallel` with this code or the `baseline` interpreter's mtbio; its cost as this
    code reads it (if the cells recorded one) and each cell's dev scores."""
    python = baseline or sys.executable
    output = workdir / f"{'baseline' if baseline else 'current'}-parallel-{parallel}"
    # run in `workdir`, paths absolute: `python -m` puts the working directory first on the module path, which
    # would put a checkout there before the interpreter's own mtbio
    command = [python, "-m", "mtbio", "-q", "pairwise", "--data-dir", str(args.data_dir.resolve()), "--recipe",
               args.recipe, "--max-train-examples", str(args.max_train_examples), "--eval-every", str(10 ** 9),
               "--seeds", "1", "--parallel", str(parallel), "--output", str(output),
               *(["--tasks", args.tasks] if args.tasks else ["--domain", args.domain]),
               *[f"--task-defs={Path(d).resolve()}" for d in args.task_defs],
               *(["--encoder", str(Path(args.encoder).resolve()) if Path(args.encoder).exists() else args.encoder]
                 if args.encoder else []),
               *(["--mixed-precision", args.mixed_precision] if args.mixed_precision else []), *args.extra]
    started = time.time()
    with UtilisationSampler() as sampler:
        done = subprocess.run(command, capture_output=True, text=True, cwd=workdir,
                              env=dict(os.environ, MTBIO_CACHE_DIR=str(output.with_name(output.name + "-cache"))))
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"--parallel {parallel}: the sweep failed\n{done.stderr[-3000:]}")
    cells = read_cells(output)
    cost = sweep_cost(cells, peak=lambda precision: peaks[precision]) or {}
    dev = {cell.run_dir.relative_to(output).as_posix(): cell_results(cell)["dev"] for cell in cells}
    trained = sum(int(cell_results(cell).get("train_examples", 0)) for cell in cells if cell.done)
    entry: dict[str, Any] = {"parallel": parallel, "code": code_of(python, workdir), "command_wall_seconds": wall,
                             "train_examples": trained, **sampler.summary()}
    if cost:
        entry["aggregate_train_examples_per_second"] = trained / cost["wall_seconds"]
    if not baseline:  # this code's layout; an older mtbio's --parallel may have meant another
        layout = local_layout(parallel if parallel == "auto" else int(parallel), len(cells))
        entry.update(processes=layout.processes, threads_each=layout.threads)
    return {**entry, **cost, "dev": dev}


def against_best_peak(result: dict[str, Any]) -> None:
    """Every run's efficiency against the highest matmul peak measured in this benchmark for its precision (a
    measurement on a cold or busy machine reads low: the peak drifted from 89 to 173 GFLOP/s in one run), over
    the cells' wall time and over the command's; the baseline's from the first run's useful FLOPs (the same cells)
    and against the same peak."""
    best = highest_peaks([result["matmul_peak_flops_per_second"], *(
        entry.get("matmul_peak_after", {}) for entry in [result.get("baseline", {}), *result["runs"]])])
    for entry in result["runs"]:
        _efficiencies(entry, entry["useful_flops"], best[entry["precision"]])
    if "baseline" in result and result["runs"]:
        first = result["runs"][0]
        _efficiencies(result["baseline"], first["useful_flops"], first["peak_flops_per_second"])


def _efficiencies(entry: dict[str, Any], flops: float, peak: float) -> None:
    """`flops` over `entry`'s command wall time × `peak`, and over its cells' wall time where its cells recorded
    their cost (an older mtbio's may not)."""
    entry["command_efficiency"] = flops / (entry["command_wall_seconds"] * peak)
    if "wall_seconds" in entry:
        entry["peak_flops_per_second"] = peak
        entry["efficiency"] = flops / (entry["wall_seconds"] * peak)


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
    parser.add_argument("--baseline-python", help="the interpreter of an older mtbio, whose sweep runs first")
    parser.add_argument("--baseline-parallel", default="3", help="the baseline sweep's --parallel (default 3: "
                        "three cells at a time, how the committed studies ran before --parallel auto)")
    parser.add_argument("--name", default="", help="suffix of the result file (before/after tags)")
    parser.add_argument("--results-dir", type=Path)
    parser.add_argument("--peak-seconds", type=float, default=2.0,
                        help="how long each matmul peak measurement runs (default: 2)")
    parser.add_argument("extra", nargs="*", help="further pairwise options, after --")
    args = parser.parse_args()
    info = machine()
    if args.mixed_precision is None:
        args.mixed_precision = "bf16" if info["cpu_bf16"] else "no"
    peaks = matmul_peaks(args.peak_seconds)
    result: dict[str, Any] = {"machine": info, "matmul_peak_flops_per_second": peaks, "domain": args.domain,
                              "tasks": args.tasks, "max_train_examples": args.max_train_examples,
                              "mixed_precision": args.mixed_precision, "recipe": args.recipe,
                              "further_options": args.extra, "runs": []}
    name = "bench_sweep" + (f"-{args.name}" if args.name else "")
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline_python:
            result["baseline"] = run(args.baseline_parallel, args, peaks, Path(tmp), args.baseline_python)
            result["baseline"]["matmul_peak_after"] = matmul_peaks(args.peak_seconds)
            print(f"baseline --parallel {args.baseline_parallel}: {result['baseline']['command_wall_seconds']:.0f} s "
                  f"command wall", flush=True)
            write_result(name, result, args.results_dir)
        for parallel in args.parallel.split(","):
            entry = run(parallel, args, peaks, Path(tmp))
            # a shared machine's peak drifts: the spread, recorded
            entry["matmul_peak_after"] = matmul_peaks(args.peak_seconds)
            result["runs"].append(entry)
            against_best_peak(result)
            print(f"--parallel {parallel}: {entry['wall_seconds']:.0f} s wall, efficiency {entry['efficiency']:.1%} "
                  f"({entry['command_efficiency']:.1%} over the command's {entry['command_wall_seconds']:.0f} s), "
                  f"cell time {', '.join(f'{k} {v:.0f} s' for k, v in entry['phase_seconds'].items())}, idle "
                  f"{entry['idle_slot_seconds']:.0f} s, peak {entry['peak_rss_mb']:.0f} MB", flush=True)
            alone = next((run for run in result["runs"] if run["parallel"] == "1"), None)
            if alone and entry is not alone and "aggregate_train_examples_per_second" in entry:
                entry["throughput_over_one_cell"] = (entry["aggregate_train_examples_per_second"]
                                                     / alone["aggregate_train_examples_per_second"])
                print(f"  {entry['aggregate_train_examples_per_second']:.1f} examples/s in all, "
                      f"x{entry['throughput_over_one_cell']:.2f} one cell at a time", flush=True)
            if "baseline" in result:
                baseline = result["baseline"]
                entry["speedup_over_baseline"] = baseline["command_wall_seconds"] / entry["command_wall_seconds"]
                entry["largest_dev_difference_from_baseline"] = largest_dev_difference(entry["dev"], baseline["dev"])
                print(f"  against the baseline: {baseline['command_efficiency']:.1%} -> "
                      f"{entry['command_efficiency']:.1%} of the machine, x{entry['speedup_over_baseline']:.2f} wall, "
                      f"largest dev difference {entry['largest_dev_difference_from_baseline']:.4f}", flush=True)
            write_result(name, result, args.results_dir)


if __name__ == "__main__":
    main()
