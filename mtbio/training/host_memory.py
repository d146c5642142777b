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

What still grows after that is glibc's freed heap: the activations of the longest batches are freed after each
step but stay resident, and small blocks allocated between them fragment that space, so a later batch of the
same shape extends the heap again (+0.1-0.2 GB each time the longest DDI batch came back in the 4-task refine).
`HeapTrimmer` bounds it: after the warm-up steps, a step that leaves resident memory more than a margin above
the warm-up's highest has glibc return its free pages (`malloc_trim`). Returning them after every step would
hold resident memory flat between steps at the cost of faulting the pages in again (x1.25 training time in
that refine); only when the margin is crossed, it costs a trim now and then (docs/speed.md).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any

CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
BF16_CACHE = "256"
IDEEP_CACHE_VARIABLE = "LRU_CACHE_CAPACITY"


def bound_host_memory(mixed_precision: str | None = None) -> None:
    """Size oneDNN's primitive cache for CPU training in `mixed_precision` (off, or 256 for bf16) and ideep's to
    one entry (values already in the environment win). Both are read when the first primitive is created: call
    this before the first CPU matmul."""
    os.environ.setdefault(CACHE_VARIABLE, BF16_CACHE if mixed_precision == "bf16" else "0")
    os.environ.setdefault(IDEEP_CACHE_VARIABLE, "1")


@functools.lru_cache(maxsize=1)
def glibc() -> Any:
    """The C library when it is glibc (Linux), for `malloc_trim` and `mallinfo2`; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def resident_mb() -> float:
    """This process's resident set size in MB (Linux: /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class HeapTrimmer:
    """Keeps resident memory after each optimizer step within `margin_mb` of its highest over the first
    `warm_steps` steps this process runs (a resumed run warms up again): a step that ends above that has glibc
    return its freed heap pages. A no-op without glibc."""

    def __init__(self, warm_steps: int, margin_mb: float):
        self.warm_steps, self.margin_mb = warm_steps, margin_mb
        self.libc = glibc() if margin_mb > 0 else None
        self.steps = 0
        self.warm_high = 0.0
        self.trims = 0

    def after_step(self) -> bool:
        """Called after each optimizer step; True when it returned the freed heap."""
        if self.libc is None:
            return False
        self.steps += 1
        resident = resident_mb()
        if self.steps <= self.warm_steps:
            self.warm_high = max(self.warm_high, resident)
            return False
        if resident <= self.warm_high + self.margin_mb:
            return False
        self.libc.malloc_trim(0)
        self.trims += 1
        return True
