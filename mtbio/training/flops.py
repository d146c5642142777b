"""Useful model FLOPs and the machine's matmul peak: how much of what the hardware can do a run or a
sweep used.

Useful FLOPs count real (non-pad) tokens only, so padding and host overhead show up as a lower
utilisation, as they should. The peak is a square matmul loop measured on this machine, cached per
machine (CPU model and flags, torch version, threads) in `~/.cache/mtbio/matmul_peaks.json`.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

import torch

from mtbio.fileio import WriteError, write_json

PEAKS_FILE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mtbio" / "matmul_peaks.json"


def dense_weights(config: Any) -> int:
    """Weights of a BERT-style encoder's dense layers (attention projections and feed-forward)."""
    hidden = config.hidden_size
    return config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * config.intermediate_size)


def useful_flops(config: Any, tokens: int, token_squares: int, training: bool = True) -> float:
    """Model FLOPs of sequences holding `tokens` real tokens in all (`token_squares`: the sum of their
    lengths squared). Forward: 2 per dense weight per token, plus 4·length·hidden per token per layer for the
    attention scores and weighted sum; training (forward + backward) is three times the forward."""
    forward = 2 * dense_weights(config) * tokens + config.num_hidden_layers * 4 * config.hidden_size * token_squares
    return float(3 * forward if training else forward)


def flops_per_sequence(config: Any, length: int, training: bool = True) -> float:
    """`useful_flops` of one sequence of `length` real tokens."""
    return useful_flops(config, length, length * length, training)


def total_flops(config: Any, lengths: Iterable[int], training: bool = True) -> float:
    values = list(lengths)
    return useful_flops(config, sum(values), sum(n * n for n in values), training)


def matmul_peak(dtype: torch.dtype, seconds: float = 2.0, size: int | None = None) -> float:
    """FLOP/s of a square matmul loop in `dtype` on this machine's device, measured now."""
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    size = size or (8192 if dev.type == "cuda" else 2048)
    a = torch.randn(size, size, device=dev, dtype=dtype)
    b = torch.randn(size, size, device=dev, dtype=dtype)
    for _ in range(2):  # warm-up
        a @ b
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        runs += 1
        if dev.type == "cuda" and runs % 10 == 0:
            sync()
    sync()
    return 2 * size**3 * runs / (time.perf_counter() - start)


def cpu_fields() -> dict[str, str]:
    """The first CPU's fields in /proc/cpuinfo ("model name", "cpu family", "model", "flags", ...); {} without it."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return {}
    lines = cpuinfo.read_text().splitlines()
    first_cpu = lines[:lines.index("")] if "" in lines else lines
    return {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in first_cpu if ":" in line)}


def machine_key() -> str:
    """What a cached peak belongs to: device, CPU model name, family and model number (a virtual machine's model
    name may be only the vendor's), vector flags, torch version, threads."""
    parts = [torch.__version__, str(torch.get_num_threads())]
    if torch.cuda.is_available():
        parts.append(torch.cuda.get_device_name(0))
    fields = cpu_fields()
    if "model name" in fields:
        parts.append(fields["model name"])
    if "cpu family" in fields and "model" in fields:
        parts.append(f"family {fields['cpu family']} model {fields['model']}")
    if "flags" in fields:
        parts.append(" ".join(sorted(f for f in fields["flags"].split() if f.startswith(("avx", "amx", "fma")))))
    return " | ".join(parts)


def cached_peak(precision: str, seconds: float = 2.0) -> dict[str, Any]:
    """{"flops_per_second", "measured_at"} of `precision` (fp32 or bf16) on this machine: measured once, then
    read from the cache. Measure on a quiet machine: a loaded one caches a low peak (delete the file to redo)."""
    key = f"{machine_key()} | {precision}"
    try:
        cache = json.loads(PEAKS_FILE.read_text())
    except (OSError, json.JSONDecodeError):
        cache = {}
    if key not in cache:
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        cache[key] = {"flops_per_second": matmul_peak(dtype, seconds), "measured_at": time.time()}
        try:
            PEAKS_FILE.parent.mkdir(parents=True, exist_ok=True)
            write_json(PEAKS_FILE, cache, indent=1)
        except (OSError, WriteError):
            pass  # an unwritable cache only means measuring again next time
    return cache[key]
