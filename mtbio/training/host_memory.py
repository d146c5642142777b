"""Host memory that stays bounded while training on a CPU.

oneDNN, which runs PyTorch's CPU matmuls, caches a primitive (with its own buffers) for every operation
shape it has seen, 1,024 by default. mtbio's batches are cut to their longest row, so a run meets many
shapes, and the cache (and the glibc heap around it) grows for hundreds of steps: a 4-task refine climbed to
4.1 GB resident with it and stayed flat at 1.3-1.4 GB without it (benchmarks/bench_memory.py, docs/speed.md).
So training on a CPU switches the cache off, unless the environment already sets
`ONEDNN_PRIMITIVE_CACHE_CAPACITY`. The price is speed where oneDNN runs the matmuls: bf16 on an AMX CPU trained
BC5CDR-chem x1.57 faster with the cache (1,024) at +0.6 GB peak (docs/speed.md).
"""
from __future__ import annotations

import os

CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def bound_host_memory() -> None:
    """Switch oneDNN's primitive cache off for this process (a value already in the environment wins).
    oneDNN reads the variable when it first creates a primitive: call this before the first CPU matmul."""
    os.environ.setdefault(CACHE_VARIABLE, "0")
