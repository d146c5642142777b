"""Fused query/key/value projections against three, in a whole encoder's training forward and backward on a CPU.

`mtbio.model.fused_qkv` runs each BERT-style self-attention layer's three projections as one product when mtbio
trains on a CPU. This times one forward and backward pass of the encoder (default: the packaged MiniLM-L6,
with mtbio's CPU attention and dropout) per setting, batch width and precision, the two settings alternating
within one process, `--threads` threads (1: one process per core, the sweep's layout).

    python benchmarks/bench_fused_qkv.py                      # widths 64, 112, 256; fp32 and bf16

Writes benchmarks/results/bench_fused_qkv.json and prints the median seconds and the ratio per case.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from common import machine, offline_environment, write_result

offline_environment()

from mtbio.model.cpu_dropout import use_bit_dropout  # noqa: E402
from mtbio.model.encoder import load_encoder  # noqa: E402
from mtbio.model.fused_qkv import fuse_qkv  # noqa: E402


def seconds(encoder: Any, ids: torch.Tensor, precision: str) -> float:
    """One training forward and backward of `encoder` on `ids`."""
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    out.float().pow(2).mean().backward()
    encoder.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default=None, help="default: the packaged MiniLM-L6")
    parser.add_argument("--widths", default="64,112,256")
    parser.add_argument("--precisions", default="no,bf16")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=6, help="alternated pairs per case")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    separate = load_encoder(args.encoder).train()
    use_bit_dropout(separate)
    fused = copy.deepcopy(separate)
    layers = fuse_qkv(fused)
    cases = []
    for precision in args.precisions.split(","):
        for width in map(int, args.widths.split(",")):
            ids = torch.randint(1000, 20000, (args.batch_size, width), generator=torch.Generator().manual_seed(0))
            times: dict[str, list[float]] = {"separate": [], "fused": []}
            for name, model in (("separate", separate), ("fused", fused)):
                seconds(model, ids, precision)  # warm-up: this shape's kernels
            for _ in range(args.repeats):
                for name, model in (("separate", separate), ("fused", fused)):
                    times[name].append(seconds(model, ids, precision))
            case = {"precision": precision, "width": width, "seconds": times,
                    "median_separate": statistics.median(times["separate"]),
                    "median_fused": statistics.median(times["fused"])}
            case["speedup"] = case["median_separate"] / case["median_fused"]
            cases.append(case)
            print(f"{precision:4s} width {width:3d}: separate {case['median_separate']:.3f} s, fused "
                  f"{case['median_fused']:.3f} s, x{case['speedup']:.3f}", flush=True)
    path = write_result("bench_fused_qkv", {"machine": machine(), "encoder": args.encoder or "minilm",
                                            "fused_layers": layers, "batch_size": args.batch_size,
                                            "threads": args.threads, "repeats": args.repeats, "cases": cases},
                        args.results_dir)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
