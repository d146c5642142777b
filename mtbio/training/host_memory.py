"""Host memory that stays bounded while training on a CPU.

oneDNN, which runs PyTorch's CPU matmuls, caches a primitive (with its own buffers) for every operation
shape it has seen, 1,024 by default. mtbio's batches are cut to their longest row, so a run meets many
shapes, and the cache (and the glibc heap around it) grows for hundreds of steps: a 4-task refine climbed to
4.1 GB resident with it and stayed flat at 1.3-1.4 GB without it (benchmarks/bench_memory.py, docs/speed.md).
So fp32 training on a CPU switches the cache off. bf16 on a CPU runs its matmuls in oneDNN and loses almost
half its speed without the cache (x0.55 on an AMX Xeon), so bf16 keeps a small cache (256 primitives) and rounds
training batch widths up to 8 (`mtbio.data.collate.pad_multiple_for`), which cuts the shapes a run meets
about threefold: on the AMX Xeon, BC5CDR-chem bf16 trained x1.8 faster than with the cache off at +5% peak
memory.

PyTorch's oneDNN wrapper (ideep) keeps a second cache of bf16 matmul primitives, one per shape, up to
`LRU_CACHE_CAPACITY` (1,024 by default), beside oneDNN's own. In the 4-task bf16 refine it grew the heap in use
by 250-310 MB over 250 steps (2 MB a step early, 0.1 MB at the end; oneDNN's cache on or off), and those
long-lived blocks, allocated in the middle of steps, kept glibc from reusing the space the activations of the
next long batch needed (benchmarks/trace_memory.py). mtbio sets it to one entry: oneDNN's cache still finds
the primitives, at the same speed on an AVX512-BF16 EPYC (docs/speed.md, "Memory on a CPU").
A value already in the environment wins either way.
"""
from __future__ import annotations

import os

CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
BF16_CACHE = "256"
IDEEP_CACHE_VARIABLE = "LRU_CACHE_CAPACITY"


def bound_host_memory(mixed_precision: str | None = None) -> None:
    """Size oneDNN's primitive cache for CPU training in `mixed_precision` (off, or 256 for bf16) and ideep's to
    one entry (values already in the environment win). Both are read when the first primitive is created: call
    this before the first CPU matmul."""
    os.environ.setdefault(CACHE_VARIABLE, BF16_CACHE if mixed_precision == "bf16" else "0")
    os.environ.setdefault(IDEEP_CACHE_VARIABLE, "1")
