"""Where a training step's time goes: torch.profiler over steps of a real `mtbio finetune` run, and which
oneDNN kernels (AMX, AVX-512, AVX2) its matrix products reach on a CPU.

A listener of the training loop starts the profiler after `--warm-steps` steps, stops it `--steps` steps later,
then turns oneDNN's verbose log on for `--verbose-steps` more steps and stops the run. Ops are grouped by their
self CPU time: matrix products, attention (softmax, masking), dropout, normalisation, activation, casts, the
optimizer, embeddings, and the rest.

    python benchmarks/profile_step.py --tasks bc5cdr-chem --mixed-precision bf16
    python benchmarks/profile_step.py --fixed-length 512 --mixed-precision bf16

On a GPU the profiler records the device too: the ops by self device time, the synchronised wall time of a step
against the time its kernels kept the device busy, and the gaps between kernels (where the device waited for the
host: launch-bound steps, recompilation, reads back). `--compile` profiles mtbio's compiled encoder:

    python benchmarks/profile_step.py --encoder bert-base-random --fixed-length 128 --batch-size 512 \
        --mixed-precision bf16 --compile --warm-steps 5 --steps 5 --verbose-steps 0

Writes benchmarks/results/profile_step-<task>-<precision>.json (tagged -co1 compiled, -<gpu> on a GPU) and prints
the groups.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from common import (add_common_arguments, device_tag, machine, materialize_encoder, matmul_peaks,
                    offline_environment, precision_name, write_fixed_length_task, write_result)

from mtbio.training.events import Flow, Listener

GROUPS = [  # (group, op-name pattern), first match wins
    ("matmul", r"aten::(mm|addmm|bmm|baddbmm|addbmm|_addmm_activation|mkldnn_.*|linear_backward)$"),
    ("attention", r"softmax|masked_fill|scaled_dot_product|_efficient_attention|_flash_attention|cpu_dropout"),
    ("dropout", r"dropout|bernoulli|random_|randint|bitwise|native_dropout"),
    ("normalisation", r"layer_norm"),
    ("activation", r"gelu|tanh|relu"),
    ("casts", r"aten::(copy_|_to_copy|to|clone|contiguous)$"),
    ("optimizer", r"_foreach_|addcdiv|addcmul|lerp|sqrt|Optimizer|clip_grad|norm"),
    ("embedding", r"embedding"),
]


def group_of(name: str) -> str:
    return next((group for group, pattern in GROUPS if re.search(pattern, name)), "other")


def kernel_gaps(intervals: list[tuple[float, float]], steps: int) -> dict[str, float]:
    """How the device's kernels (start, end in microseconds) filled the profiled span: the time at least one ran
    (busy), the idle time between them, per step, and the idle stretches' median and largest."""
    busy, gaps, reach = 0.0, [], None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            if reach is not None:
                gaps.append(start - reach)
            busy, reach = busy + end - start, end
        elif end > reach:
            busy, reach = busy + end - reach, end
    ordered = sorted(gaps)
    return {"kernels_per_step": len(intervals) / steps, "busy_seconds_per_step": busy / 1e6 / steps,
            "gap_seconds_per_step": sum(gaps) / 1e6 / steps, "gaps_per_step": len(gaps) / steps,
            "median_gap_us": ordered[len(ordered) // 2] if ordered else 0.0,
            "largest_gap_us": ordered[-1] if ordered else 0.0}


class StepProfiler(Listener):
    """Profiles steps (warm, warm + steps]; logs oneDNN's kernels for the next `verbose_steps`, then stops the run."""

    def __init__(self, warm: int, steps: int, verbose_steps: int, verbose_file: Path):
        self.warm, self.steps, self.verbose_steps, self.verbose_file = warm, steps, verbose_steps, verbose_file
        self.profiler: Any = None
        self.table: list[dict[str, Any]] = []
        self.kernels: list[tuple[float, float]] = []  # (start, end) of each device kernel, microseconds
        self.wall_seconds = 0.0  # of the profiled steps, the device synchronised at both ends
        self._saved_stdout = -1
        self._verbose: Any = None
        if warm == 0:  # the first step: profiled from here, so the run's set-up after this point counts too
            self._start()

    def _start(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
            torch.cuda.synchronize()
        self.profiler = torch.profiler.profile(activities=activities)
        self.profiler.__enter__()
        self.wall_seconds = -time.perf_counter()

    def _stop(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.wall_seconds += time.perf_counter()
        self.profiler.__exit__(None, None, None)
        self.table = [{"op": e.key, "self_cpu_us": e.self_cpu_time_total, "self_device_us": e.self_device_time_total,
                       "count": e.count} for e in self.profiler.key_averages()]
        self.kernels = [(e.time_range.start, e.time_range.end) for e in self.profiler.events()
                        if e.device_type == torch.autograd.DeviceType.CUDA]

    def on_step_end(self, trainer: Any, flow: Flow) -> None:
        step = trainer.state.global_step
        if step == self.warm:
            self._start()
        elif step == self.warm + self.steps:
            self._stop()
            if not self.verbose_steps:
                flow.stop = True
                return
            sys.stdout.flush()  # oneDNN writes its log to file descriptor 1
            self._saved_stdout = os.dup(1)
            with open(self.verbose_file, "w") as log:
                os.dup2(log.fileno(), 1)
            self._verbose = torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
            self._verbose.__enter__()
        elif step == self.warm + self.steps + self.verbose_steps:
            self._verbose.__exit__(None, None, None)
            ctypes.CDLL(None).fflush(None)  # the C library's buffered log lines go to the file, not the terminal
            os.dup2(self._saved_stdout, 1)
            os.close(self._saved_stdout)
            flow.stop = True


def onednn_kernels(log: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per event (exec; create:cache_miss or create:cache_hit, the primitive built or found in oneDNN's cache),
    the count and milliseconds of each (primitive, implementation) in a oneDNN verbose log."""
    events: dict[str, Any] = collections.defaultdict(lambda: collections.defaultdict(lambda: {"count": 0, "ms": 0.0}))
    for line in log.read_text(errors="replace").splitlines():
        fields = line.split(",")
        if len(fields) < 8 or not fields[0].startswith("onednn_verbose") or fields[2] != "primitive" \
                or not fields[3].startswith(("exec", "create")):
            continue
        entry = events[fields[3]][f"{fields[5]} {fields[6]}"]
        entry["count"] += 1
        try:
            entry["ms"] += float(fields[-1])
        except ValueError:
            pass
    return {event: dict(sorted(kernels.items(), key=lambda kv: -kv[1]["ms"])) for event, kernels in events.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--tasks", default="bc5cdr-chem", help="The task to fine-tune (default: bc5cdr-chem).")
    parser.add_argument("--fixed-length", type=int, default=None,
                        help="Profile a synthetic task whose texts fill this many tokens instead of --tasks.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warm-steps", type=int, default=10,
                        help="Steps before the profiled ones (0: the first step, the run's set-up included).")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--verbose-steps", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="mtbio --compile (torch.compile the encoder); the "
                        "warm-up steps must cover its compilation. Tags the result file -co1.")
    args = parser.parse_args()
    offline_environment()
    from mtbio.experiments.common import data_dir_for, resolve_tasks
    from mtbio.experiments.training_run import train_tasks
    from mtbio.model.encoder import load_tokenizer
    from mtbio.training.config import REFINE_LR, RunConfig

    chosen_cache = os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY")  # else mtbio's training default
    with tempfile.TemporaryDirectory() as tmp:
        encoder = materialize_encoder(args.encoder, Path(tmp))
        task, defs, data, length = args.tasks, list(map(str, args.task_defs)), args.data_dir, 128
        if args.fixed_length:
            task, extra, data = write_fixed_length_task(Path(tmp) / "fixed", load_tokenizer(encoder),
                                                        args.fixed_length, args.batch_size * 40)
            defs, length = defs + [str(extra)], args.fixed_length
        profiler = StepProfiler(args.warm_steps, args.steps, args.verbose_steps, Path(tmp) / "onednn.log")
        config = RunConfig(tasks=[task], encoder=encoder, data_dir=str(data), output=str(Path(tmp) / "run"),
                           task_defs=defs, batch_size=args.batch_size, max_length=length, epochs=1,
                           mixed_precision=args.mixed_precision, max_eval_examples=args.batch_size,
                           compile=args.compile)
        # the single-task baseline's path (`mtbio finetune --encoder`), with the profiler listening
        train_tasks(resolve_tasks(config), config, Path(tmp) / "run", encoder, config.learning_rate(REFINE_LR),
                    "single-task", data_dir_for(config), listeners=[profiler])
        log = Path(tmp) / "onednn.log"
        kernels = onednn_kernels(log) if log.exists() else {}  # none with --verbose-steps 0
    total = sum(row["self_cpu_us"] for row in profiler.table)
    groups: dict[str, float] = collections.Counter()
    for row in profiler.table:
        groups[group_of(row["op"])] += row["self_cpu_us"]
    top = sorted(profiler.table, key=lambda row: -row["self_cpu_us"])[:30]
    name = f"fixed-{args.fixed_length}" if args.fixed_length else task
    if torch.cuda.is_available():
        device_total = sum(row["self_device_us"] for row in profiler.table)
        device = {"top_device_ops": [{**row, "device_share": row["self_device_us"] / max(device_total, 1e-9)} for row in
                                     sorted(profiler.table, key=lambda row: -row["self_device_us"])[:30]],
                  "kernel_gaps": kernel_gaps(profiler.kernels, args.steps)}
    else:
        device = {"device_time": "no CUDA device"}
    result = {"task": name, "precision": args.mixed_precision, "batch_size": args.batch_size,
              "max_length": length, "profiled_steps": args.steps, "after_steps": args.warm_steps,
              "compile": args.compile, "machine": machine(),
              "matmul_peak_flops_per_second": matmul_peaks(args.peak_seconds),
              "wall_seconds_per_step": profiler.wall_seconds / args.steps,
              "self_cpu_seconds_per_step": total / 1e6 / args.steps, **device,
              "groups_share": {g: s / total for g, s in sorted(groups.items(), key=lambda kv: -kv[1])},
              "top_ops": [{**row, "share": row["self_cpu_us"] / total} for row in top],
              "onednn_primitive_cache": os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY"),
              "onednn_kernels": kernels}
    tag = ("" if chosen_cache is None else f"-cache{chosen_cache}") + ("-co1" if args.compile else "") + device_tag()
    path = write_result(f"profile_step-{name}-{precision_name(args.mixed_precision)}{tag}", result, args.results_dir)
    print(f"{name} {args.mixed_precision}: {result['wall_seconds_per_step']:.3f} s a step, "
          f"{result['self_cpu_seconds_per_step']:.3f} s of host op time")
    if "kernel_gaps" in result:
        gaps = result["kernel_gaps"]
        print(f"  device busy {gaps['busy_seconds_per_step']:.3f} s a step, idle between kernels "
              f"{gaps['gap_seconds_per_step']:.3f} s ({gaps['kernels_per_step']:.0f} kernels a step, largest gap "
              f"{gaps['largest_gap_us']:.0f} us)")
    for group, share in result["groups_share"].items():
        print(f"  {group:14s} {share:6.1%}")
    for event, entries in kernels.items():
        for kernel, entry in list(entries.items())[:4]:
            print(f"  {event} {kernel}: {entry['count']} times, {entry['ms']:.1f} ms")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
