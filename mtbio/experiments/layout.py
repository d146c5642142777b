"""How `--launcher local` lays a sweep out on this machine: how many worker processes, each with how many
CPU threads or which GPU (`--parallel N` or `auto`)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Layout:
    """`processes` workers (1: the cells run in the calling process), each with `threads` CPU threads;
    `gpus`: the GPU ids the workers take in turn (none: CPU only)."""

    processes: int
    threads: int
    gpus: tuple[str, ...] = ()

    def describe(self) -> str:
        where = f"one GPU each ({', '.join(self.gpus)})" if self.gpus else f"{self.threads} CPU thread(s) each"
        return f"{self.processes} process{'es' if self.processes > 1 else ''}, {where}"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a SLURM or container limit), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS)
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """The GPU ids this machine offers (CUDA_VISIBLE_DEVICES if set), without initialising CUDA here."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g for g in given.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def local_layout(parallel: int | Literal["auto"], cells_left: int, gpus: list[str] | None = None,
                 cores: int | None = None) -> Layout:
    """The workers of `--parallel`. N: N processes sharing the cores (or taking the GPUs in turn). auto: a
    process per GPU where there are GPUs, else a single-thread process per core (of 1×2, 2×1 and 3×1
    processes×threads on 2 cores, 2×1 trained a sweep fastest: benchmarks/results/bench_sweep-layout-200.json),
    never more processes than cells left to train."""
    gpus = visible_gpus() if gpus is None else gpus
    cores = usable_cores() if cores is None else cores
    if parallel == "auto":
        processes = max(1, min(len(gpus) or cores, cells_left))
    else:
        processes = parallel
    return Layout(processes, max(1, cores // processes), tuple(gpus) if processes > 1 else ())
