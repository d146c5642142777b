"""Training attention on a CPU: the eager path against the lean one, by sequence length.

`mtbio.model.cpu_dropout` trains attention with dropout in one of two ways: eager (the probabilities, the
dropout mask and the dropped probabilities kept for the backward pass) or lean (only a one-byte mask kept,
the probabilities recomputed in the backward pass, a block of whole heads at a time). This times one forward
and backward pass of MiniLM-shaped attention (12 heads of 32 dimensions) per path and length, the paths
alternating, and measures each one's peak resident memory above its inputs in a fresh process. Its ratios
choose `cpu_dropout.LEAN_FROM_LENGTH`.

`--baseline-tree DIR` adds a third path, the lean attention of another checkout (DIR's
`mtbio/model/cpu_dropout.py`), to the same alternation: a before/after of a change to the lean path in one
process, step by step, so that a virtual machine's drifting speed falls on both sides alike. `--whole-encoder`
times a whole forward and backward pass of the packaged MiniLM (every layer's attention on the path) instead of
one attention layer.

    python benchmarks/bench_attention.py                      # lengths 128, 256, 512; fp32 and bf16
    python benchmarks/bench_attention.py --lengths 512 --precisions fp32 --whole-encoder --baseline-tree ../old

Writes benchmarks/results/bench_attention[-encoder].json and prints one line per precision and length.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

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


Attention = Callable[..., tuple[torch.Tensor, None]]


def one_layer(batch: int, length: int) -> Callable[[Attention], torch.Tensor]:
    """A forward pass of one attention layer through the given attention function; returns what to differentiate."""
    query, key, value, mask = inputs(batch, length)
    module = nn.Module().train()
    return lambda attention: attention(module, query, key, value, mask, dropout=0.1)[0].float().sum()


def whole_encoder(batch: int, length: int) -> Callable[[Attention], torch.Tensor]:
    """A training forward pass of the packaged MiniLM (mtbio's dropout) with every layer's attention through the
    given attention function; returns what to differentiate."""
    from transformers import AttentionInterface, AutoModel

    from mtbio.model.encoder import resolve_encoder_name

    model = AutoModel.from_pretrained(resolve_encoder_name(None), attn_implementation="sdpa")
    cpu_dropout.use_bit_dropout(model)
    model.train()
    torch.manual_seed(0)
    ids = torch.randint(1000, model.config.vocab_size, (batch, length))
    mask = torch.ones_like(ids)
    mask[::2, length * 3 // 4:] = 0  # every other sequence a quarter padding

    def forward(attention: Attention) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        AttentionInterface.register(cpu_dropout.ATTENTION, attention)
        return model(input_ids=ids, attention_mask=mask).last_hidden_state.float().sum()
    return forward


def attention_for(path: str, baseline: ModuleType | None) -> Attention:
    """`path`'s attention function: this checkout's with the lean path never (eager) or always (lean) taken, or
    the baseline checkout's with its lean path always taken."""
    module = baseline if path == "baseline" else cpu_dropout
    module.LEAN_FROM_LENGTH = sys.maxsize if path == "eager" else 0
    return module._attention


def load_baseline(tree: Path | None) -> ModuleType | None:
    """Another checkout's `mtbio.model.cpu_dropout`, loaded beside this one's."""
    if tree is None:
        return None
    spec = importlib.util.spec_from_file_location("baseline_cpu_dropout", tree / "mtbio" / "model" / "cpu_dropout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step(path: str, forward: Callable[[Attention], torch.Tensor], precision: str, baseline: ModuleType | None) -> float:
    """Seconds for one forward and backward pass on `path`."""
    attention = attention_for(path, baseline)
    started = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = forward(attention)
    loss.backward()
    return time.perf_counter() - started


def high_water_mb() -> float:
    """This process image's peak resident size (VmHWM): unlike ru_maxrss, not inherited from the parent across exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return peak_memory_mb()


def memory_child(args: argparse.Namespace) -> None:
    forward = (whole_encoder if args.whole_encoder else one_layer)(args.batch_size, int(args.lengths))
    before = high_water_mb()
    step(args.child, forward, args.precisions, load_baseline(args.baseline_tree))
    print(json.dumps({"peak_above_inputs_mb": high_water_mb() - before}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="128,256,512")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=5, help="Alternated timings per path (median).")
    parser.add_argument("--baseline-tree", type=Path, help="Another checkout whose lean path joins the alternation.")
    parser.add_argument("--whole-encoder", action="store_true",
                        help="Time the packaged MiniLM's forward and backward pass instead of one attention layer.")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        memory_child(args)
        return
    info = machine()
    baseline = load_baseline(args.baseline_tree)
    paths = ["eager", "lean"] + (["baseline"] if baseline else [])
    precisions = [p for p in args.precisions.split(",") if p == "fp32" or info["cpu_bf16"]]
    rows: list[dict[str, Any]] = []
    for precision in precisions:
        for length in map(int, args.lengths.split(",")):
            forward = (whole_encoder if args.whole_encoder else one_layer)(args.batch_size, length)
            times: dict[str, list[float]] = {path: [] for path in paths}
            for path in times:  # warm-up
                step(path, forward, precision, baseline)
            for _ in range(args.repeats):
                for path in times:
                    times[path].append(step(path, forward, precision, baseline))
            row: dict[str, Any] = {"precision": precision, "length": length, "batch_size": args.batch_size}
            for path in times:
                command = [sys.executable, __file__, "--child", path, "--lengths", str(length), "--precisions",
                           precision, "--batch-size", str(args.batch_size)] + \
                    (["--whole-encoder"] if args.whole_encoder else []) + \
                    (["--baseline-tree", str(args.baseline_tree)] if baseline else [])
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                row[path] = {"median_seconds": statistics.median(times[path]), "seconds": times[path],
                             **json.loads(output.splitlines()[-1])}
            row["lean_speedup"] = row["eager"]["median_seconds"] / row["lean"]["median_seconds"]
            eager_mb = row["eager"]["peak_above_inputs_mb"]
            row["lean_memory_ratio"] = row["lean"]["peak_above_inputs_mb"] / eager_mb if eager_mb else None
            line = (f"{precision} length {length}: lean ×{row['lean_speedup']:.2f} speed, peak memory above the "
                    f"inputs {row['lean']['peak_above_inputs_mb']:.0f} MB vs {eager_mb:.0f} MB eager")
            if baseline:  # step by step: each repeat's baseline time over the lean time just before it
                row["lean_over_baseline_paired"] = statistics.median(
                    b / a for a, b in zip(times["lean"], times["baseline"]))
                line += (f"; ×{row['lean_over_baseline_paired']:.2f} the baseline's lean speed (paired median), "
                         f"{row['baseline']['peak_above_inputs_mb']:.0f} MB")
            rows.append(row)
            print(line, flush=True)
            write_result("bench_attention" + ("-encoder" if args.whole_encoder else ""),
                         {"machine": info, "heads": HEADS, "head_dim": HEAD_DIM, "dropout": 0.1,
                          "unit": "whole encoder" if args.whole_encoder else "one attention layer",
                          "baseline_tree": str(args.baseline_tree) if baseline else None, "rows": rows},
                         args.results_dir)


if __name__ == "__main__":
    main()
