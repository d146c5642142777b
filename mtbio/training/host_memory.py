"""Host memory that stays bounded while training on a CPU.

oneDNN, which runs PyTorch's CPU matmuls, caches a primitive (with its own buffers) for every operation
shape it has seen, 1,024 by default. mtbio's batches are cut to their longest row, so a run meets many
shapes, and the cache (and the glibc heap around it) grows for hundreds of steps: a 4-task refine climbed to
4.1 GB resident with it and stayed flat at 1.3-1.4 GB without it (benchmarks/bench_memory.py, docs/speed.md).
So fp32 training on a CPU switches the cache off. bf16 on a CPU runs its matmuls in oneDNN and loses almost
half its speed without the cache (x0.55 on an AMX Xeon), so bf16 keeps a cache and rounds training batch widths
up to 8 (`mtbio.data.collate.pad_multiple_for`), which cuts the shapes a run meets about threefold. On the AMX
Xeon a cache of 256 primitives trained BC5CDR-chem bf16 x1.8 faster than with the cache off at +5% peak memory,
and AMX CPUs keep 256. On an AVX512-BF16 EPYC, 256 peaked x1.3-1.4 higher than the cache off and rose late in the
run (cached primitives, made as new batch shapes come, pin freed heap), while 32 primitives (about one step's:
the six layers of a step reuse them) ran the 4-task bf16 refine as fast as 256 at x0.82 its peak, within 34 MB
of flat after the second fifth of its steps (two runs each); so CPUs without AMX keep 32 (not measured on AMX).

PyTorch's oneDNN wrapper (ideep) keeps a second cache of bf16 matmul primitives, one per shape, up to
`LRU_CACHE_CAPACITY` (1,024 by default), beside oneDNN's own. In the 4-task bf16 refine it grew the heap in use
by 250-310 MB over 250 steps (2 MB a step early, 0.1 MB at the end; oneDNN's cache on or off), and those
long-lived blocks, allocated in the middle of steps, kept glibc from reusing the space the activations of the
next long batch needed (benchmarks/trace_memory.py). mtbio sets it to one entry: oneDNN's cache still finds
the primitives, at the same speed on an AVX512-BF16 EPYC (docs/speed.md, "Memory on a CPU").
A value already in the environment wins either way.

glibc gives each block over its mmap threshold (32 MiB at most) a fresh mapping and unmaps it when freed, so
the next such block faults every page in again, and it returns freed space at the heap's top (and the top of each
thread's heap) to the system, so the next step faults it in again. So CPU training has glibc serve blocks up to
1 GiB from its heap and keep up to 1 GiB of it freed (`keep_freed_heap`): 512-token fp32 training ran x1.10-1.16
faster at a peak within 3%, a refine with NLI4CT (512 tokens) x1.05 faster at a x0.98 peak, and a BC5CDR-chem fp32
fine-tune on two threads (128 tokens; 7,300-44,000 page faults a step without it) x1.04 faster at the same peak.
The 4-task bf16 refine (at most 256 tokens) showed no difference that two pairs of runs could tell (x0.97 and
x1.02 the speed, x1.04 and x1.02 the peak; docs/speed.md, "Memory on a CPU").
"""
from __future__ import annotations

import ctypes
import os
import platform

CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
BF16_CACHE = {"amx": "256", "other": "32"}  # primitives kept in bf16 training, by CPU kind (measured on each)
IDEEP_CACHE_VARIABLE = "LRU_CACHE_CAPACITY"
KEEP_HEAP_VARIABLE = "MTBIO_KEEP_FREED_HEAP"  # 0: leave glibc's thresholds as they are
GLIBC_HEAP_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
HEAP_KEPT_BYTES = 2**30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def bound_host_memory(mixed_precision: str | None = None) -> None:
    """Size oneDNN's primitive cache for CPU training in `mixed_precision` (off in fp32; in bf16 256 on a CPU with
    AMX, else 32) and ideep's to one entry (values already in the environment win). Both are read when the first
    primitive is created: call this before the first CPU matmul."""
    os.environ.setdefault(CACHE_VARIABLE, bf16_cache() if mixed_precision == "bf16" else "0")
    os.environ.setdefault(IDEEP_CACHE_VARIABLE, "1")


def bf16_cache() -> str:
    """oneDNN primitives that bf16 training keeps on this CPU (`BF16_CACHE`)."""
    from mtbio.model.inference import cpu_has

    return BF16_CACHE["amx" if cpu_has("_is_amx_tile_supported") else "other"]


def keep_freed_heap() -> bool:
    """Have glibc serve blocks up to 1 GiB from its heap and keep up to 1 GiB of it freed, so big tensors reuse
    pages already mapped. Returns whether it did (not on other C libraries, nor where glibc's own variables are set
    or MTBIO_KEEP_FREED_HEAP=0). It holds for the rest of the process."""
    if os.environ.get(KEEP_HEAP_VARIABLE) == "0":
        return False
    if any(v in os.environ for v in GLIBC_HEAP_VARIABLES) or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, HEAP_KEPT_BYTES) and libc.mallopt(_M_TRIM_THRESHOLD, HEAP_KEPT_BYTES))
