"""Resident memory of a multi-task refine over its steps, with and without oneDNN's primitive cache and under
different glibc malloc settings.

The same `mtbio refine` (default: chemprot, ddi, bc5cdr-chem, bc5cdr-disease; 2,000 examples per task;
the packaged MiniLM's recipe; bf16 where the CPU has it) runs once per allocator setting, each in its
own process, oneDNN's default primitive cache first as the baseline. A sampler reads the process's resident
set (RSS, and anonymous memory) every `--every` seconds, with the last step the run has logged (the refine
writes metrics.jsonl every `--log-every` steps). Per setting: peak RSS; RSS once 20% of the steps are done
(warm-up) and the growth over the last 80% of the steps; the same by time (first 20% of the wall time);
and the wall time.

    python benchmarks/bench_memory.py --data-dir ../shared/data --max-steps 250

Writes benchmarks/results/bench_memory.json with the machine description.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from common import machine, offline_environment, write_result

offline_environment()

JEMALLOC = [Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"), Path("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2")]
# oneTBB's scalable allocator in place of glibc's malloc (the proxy needs the allocator loaded beside it)
TBBMALLOC = ["libtbbmalloc.so.2", "libtbbmalloc_proxy.so.2"]
SETTINGS: dict[str, dict[str, str]] = {
    # the baseline: oneDNN's own default, a primitive (with its buffers) cached for each of up to 1,024 shapes,
    # which is what mtbio ran with before it sized the cache itself (mtbio/training/host_memory.py)
    "oneDNN cache 1024 (before)": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"},
    # mtbio before it sized ideep's second per-shape primitive cache (1,024 by default) to one entry
    "ideep cache 1024 (before)": {"LRU_CACHE_CAPACITY": "1024"},
    # glibc's own mmap and trim thresholds (mtbio before 2026-11-27 at under 512 tokens)
    "heap not kept": {"MTBIO_KEEP_FREED_HEAP": "0"},
    # mtbio's choice: cache off in fp32, 256 primitives and widths rounded to 8 in bf16; ideep's cache one entry;
    # freed heap kept (mtbio/training/host_memory.py: blocks up to 1 GiB from glibc's heap, up to 1 GiB of it
    # kept freed)
    "mtbio default": {},
    # torch's own switch: CPU tensors page-aligned, and those of 2 MiB or more madvised for transparent huge
    # pages (where the kernel's THP mode is "madvise" or "always")
    "huge pages (THP_MEM_ALLOC_ENABLE=1)": {"THP_MEM_ALLOC_ENABLE": "1"},
    # blocks of 4 MiB or more mapped on their own and returned when freed (no heap to fragment), in huge pages
    "mmap from 4 MiB": {"MALLOC_MMAP_THRESHOLD_": str(4 * 2**20)},
    "huge pages + mmap from 4 MiB": {"THP_MEM_ALLOC_ENABLE": "1", "MALLOC_MMAP_THRESHOLD_": str(4 * 2**20)},
    "oneDNN cache off": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"},
    # every block of 8 MiB or more its own mapping, returned to the system when freed (glibc otherwise raises
    # the threshold after each such free, and later big tensors stay in the heap)
    "cache off + MALLOC_MMAP_THRESHOLD_=8MiB": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0",
                                                "MALLOC_MMAP_THRESHOLD_": str(8 * 2**20)},
    "cache off + MALLOC_ARENA_MAX=2": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0", "MALLOC_ARENA_MAX": "2"},
    # attention with dropout keeps a one-byte mask instead of three float copies of its scores from N keys
    # (mtbio/model/cpu_dropout.py; mtbio's default: 129)
    "lean attention from 256 keys": {"MTBIO_LEAN_ATTENTION_FROM": "256"},
    "lean attention from 128 keys": {"MTBIO_LEAN_ATTENTION_FROM": "128"},
    "lean attention never": {"MTBIO_LEAN_ATTENTION_FROM": str(2**31)},
    # batch widths rounded up to a multiple of 8: fewer distinct matmul shapes, so fewer cached primitives
    "oneDNN cache 1024 + widths to 8": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"},
    "oneDNN cache 256 + widths to 8": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256"},
    # a cache that holds about one step's primitives: reused by the six layers of a step, made again when a batch
    # shape comes back, so cached primitives do not outlive the steps around them by long
    "oneDNN cache 32": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "32"},
    "oneDNN cache 64": {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"},
    # widths rounded up to a multiple of 32: a quarter of bf16's shapes (the guess: freed activations of one long
    # batch then fit the next one's more often, so glibc's heap fragments less), at the price of padded work
    "widths to 32": {},
}
# refine options of a setting, beside its environment
SETTING_OPTIONS: dict[str, list[str]] = {"oneDNN cache 1024 + widths to 8": ["--pad-multiple", "8"],
                                         "oneDNN cache 256 + widths to 8": ["--pad-multiple", "8"],
                                         "widths to 32": ["--pad-multiple", "32"]}


def anonymous_mb(process: psutil.Process) -> float:
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run(setting: str, env_extra: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    output = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    command = [sys.executable, "-m", "mtbio", "-q", "refine", "--tasks", args.tasks, "--max-train-examples",
               str(args.max_train_examples), "--max-steps", str(args.max_steps), "--recipe", "minilm",
               "--output", str(output / "run"),
               "--save-every", str(10 ** 9), "--eval-every", str(10 ** 9), "--log-every", str(args.log_every),
               *SETTING_OPTIONS.get(setting, [])]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.mixed_precision:
        command += ["--mixed-precision", args.mixed_precision]
    started = time.time()
    process = subprocess.Popen(command, env={**os.environ, **env_extra}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    samples = []
    while process.poll() is None:
        try:
            samples.append((time.time() - started, watched.memory_info().rss / 2**20, anonymous_mb(watched),
                            last_step(output / "run" / "metrics.jsonl")))
        except psutil.Error:
            break
        time.sleep(args.every)
    _, stderr = process.communicate()
    wall = time.time() - started
    shutil.rmtree(output, ignore_errors=True)
    if process.returncode != 0:
        raise SystemExit(f"{setting}: refine failed\n{stderr[-2000:]}")
    samples = [s for s in samples if s[1] > 0]  # a last read of a process already exiting
    warm = [s for s in samples if s[0] <= 0.2 * wall] or samples[:1]
    after = [s for s in samples if s[0] > 0.2 * wall] or samples[-1:]
    warm_step = [s for s in samples if s[3] >= 0.2 * args.max_steps]
    # the highest RSS in each fifth of the steps: a profile that rises keeps setting new highs late
    fifths = [max((s[1] for s in samples if min(4, s[3] * 5 // args.max_steps) == i), default=None) for i in range(5)]
    return {"setting": setting, "env": env_extra, "options": SETTING_OPTIONS.get(setting, []), "wall_seconds": wall,
            "peak_rss_mb": max(s[1] for s in samples), "peak_anon_mb": max(s[2] for s in samples),
            "rss_end_of_warmup_mb": warm[-1][1], "rss_growth_after_warmup_mb": max(s[1] for s in after) - warm[-1][1],
            "rss_at_20pct_steps_mb": warm_step[0][1] if warm_step else None,
            "rss_growth_last_80pct_steps_mb": (max(s[1] for s in warm_step) - warm_step[0][1]) if warm_step else None,
            "rss_peak_by_fifth_of_steps_mb": fifths,
            "rss_peak_rise_after_second_fifth_mb": (max(fifths[2:]) - fifths[1]) if None not in fifths else None,
            "samples": [{"t": round(t, 1), "rss_mb": round(r, 1), "anon_mb": round(a, 1), "step": step}
                        for t, r, a, step in samples]}


def last_step(metrics: Path) -> int:
    """The last training step logged in a run's metrics.jsonl (0 before the first record)."""
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return 0
    steps = [json.loads(line)["step"] for line in lines if line.endswith("}")]
    return steps[-1] if steps else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="chemprot,ddi,bc5cdr-chem,bc5cdr-disease")
    parser.add_argument("--data-dir")
    parser.add_argument("--max-train-examples", type=int, default=2000)
    parser.add_argument("--max-steps", type=int, default=250)
    parser.add_argument("--mixed-precision", default=None, help="default: the recipe's / Accelerate's")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--log-every", type=int, default=5, help="the refine's --log-every: how finely samples "
                                                                 "know their step")
    parser.add_argument("--settings", help="comma-separated names of SETTINGS to run, the first as the baseline "
                                           "(default: all, + jemalloc and tbbmalloc where installed)")
    parser.add_argument("--name", default="bench_memory")
    args = parser.parse_args()
    settings = dict(SETTINGS)
    jemalloc = next((p for p in JEMALLOC if p.exists()), None)
    if jemalloc is not None:
        settings["jemalloc"] = {"LD_PRELOAD": str(jemalloc)}
    tbbmalloc = [Path(sys.prefix, "lib", name) for name in TBBMALLOC]
    if all(p.exists() for p in tbbmalloc):  # oneTBB's allocator, from PyPI's `tbb` wheel
        settings["tbbmalloc"] = {"LD_PRELOAD": " ".join(map(str, tbbmalloc))}
        # blocks from 1 MiB on count as "huge", which tbbmalloc keeps cached instead of returning them
        settings["tbbmalloc keeping blocks from 1 MiB"] = {**settings["tbbmalloc"],
                                                         "TBB_MALLOC_SET_HUGE_OBJECT_THRESHOLD": str(2**20)}
    if args.settings:
        settings = {k: settings[k] for k in args.settings.split(",") if k in settings}  # in the order given
    result: dict[str, Any] = {"machine": machine(), "tasks": args.tasks, "max_train_examples": args.max_train_examples,
                              "max_steps": args.max_steps, "runs": []}
    for name, extra in settings.items():
        entry = run(name, extra, args)
        result["runs"].append(entry)
        baseline = result["runs"][0]
        entry["peak_rss_vs_baseline"] = entry["peak_rss_mb"] / baseline["peak_rss_mb"]
        print(f"{name:55s} peak RSS {entry['peak_rss_mb']:7.0f} MB (anon {entry['peak_anon_mb']:6.0f}), growth after "
              f"warm-up {entry['rss_growth_after_warmup_mb']:+6.0f} MB (last 80% of steps "
              f"{entry['rss_growth_last_80pct_steps_mb'] or 0:+6.0f}; highest after the 2nd fifth of steps over its "
              f"{entry['rss_peak_rise_after_second_fifth_mb'] or 0:+6.0f}), {entry['wall_seconds']:5.0f} s, "
              f"×{entry['peak_rss_vs_baseline']:.2f} of the baseline's peak", flush=True)
        write_result(args.name, result)


if __name__ == "__main__":
    main()
