"""Training attention on a CPU: the eager path against the lean one, by sequence length.

`mtbio.model.cpu_dropout` trains attention with dropout in one of two ways: eager (the probabilities, the
dropout mask and the dropped probabilities kept for the backward pass) or lean (only a one-byte mask kept,
the probabilities recomputed in the backward pass, a block of whole heads at a time). This times one forward
and backward pass of MiniLM-shaped attention (12 heads of 32 dimensions) per path and length, the paths
alternating, and measures each one's peak resident memory above its inputs in a fresh process. Its ratios
choose `cpu_dropout.LEAN_FROM_LENGTH`.

    python benchmarks/bench_attention.py                      # lengths 128, 256, 512; fp32 and bf16

Writes benchmarks/results/bench_attention.json and prints one line per precision and length.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from common import RESULTS, machine, peak_memory_mb, write_result

from mtbio.model import cpu_dropout

HEADS, HEAD_DIM = 12, 32


def inputs(batch: int, length: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    query, key, value = (torch.randn(batch, HEADS, length, HEAD_DIM, requires_grad=True) for _ in range(3))
    mask = torch.ones(batch, 1, length, length, dtype=torch.bool)
    mask[::2, :, :, length * 3 // 4:] = False  # every other sequence a quarter padding
    return query, key, value, mask


def step(path: str, tensors: tuple[torch.Tensor, ...], precision: str) -> float:
    """Seconds for one forward and backward pass of `path` attention."""
    cpu_dropout.LEAN_FROM_LENGTH = 0 if path == "lean" else sys.maxsize
    query, key, value, mask = tensors
    module = nn.Module().train()
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        out, _ = cpu_dropout._attention(module, query, key, value, mask, dropout=0.1)
    out.float().sum().backward()
    return time.perf_counter() - started


def high_water_mb() -> float:
    """This process image's peak resident size (VmHWM): unlike ru_maxrss, not inherited from the parent across exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return peak_memory_mb()


def memory_child(path: str, batch: int, length: int, precision: str) -> None:
    tensors = inputs(batch, length)
    before = high_water_mb()
    step(path, tensors, precision)
    print(json.dumps({"peak_above_inputs_mb": high_water_mb() - before}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="128,256,512")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=5, help="Alternated timings per path (median).")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, batch, length, precision = args.child
        memory_child(path, int(batch), int(length), precision)
        return
    info = machine()
    precisions = [p for p in args.precisions.split(",") if p == "fp32" or info["cpu_bf16"]]
    rows: list[dict[str, Any]] = []
    for precision in precisions:
        for length in map(int, args.lengths.split(",")):
            tensors = inputs(args.batch_size, length)
            times: dict[str, list[float]] = {"eager": [], "lean": []}
            for path in times:  # warm-up
                step(path, tensors, precision)
            for _ in range(args.repeats):
                for path in times:
                    times[path].append(step(path, tensors, precision))
            row: dict[str, Any] = {"precision": precision, "length": length, "batch_size": args.batch_size}
            for path in times:
                command = [sys.executable, __file__, "--child", path, str(args.batch_size), str(length), precision]
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                row[path] = {"median_seconds": sorted(times[path])[len(times[path]) // 2], "seconds": times[path],
                             **json.loads(output.splitlines()[-1])}
            row["lean_speedup"] = row["eager"]["median_seconds"] / row["lean"]["median_seconds"]
            eager_mb = row["eager"]["peak_above_inputs_mb"]
            row["lean_memory_ratio"] = row["lean"]["peak_above_inputs_mb"] / eager_mb if eager_mb else None
            rows.append(row)
            print(f"{precision} length {length}: lean ×{row['lean_speedup']:.2f} speed, peak memory above the inputs "
                  f"{row['lean']['peak_above_inputs_mb']:.0f} MB vs {eager_mb:.0f} MB eager", flush=True)
            write_result("bench_attention", {"machine": info, "heads": HEADS, "head_dim": HEAD_DIM,
                                             "dropout": 0.1, "rows": rows}, args.results_dir)


if __name__ == "__main__":
    main()
