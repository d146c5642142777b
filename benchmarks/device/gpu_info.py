"""The first step of `gpu_set.sh`: the device and its measured matmul peak, to `DIR/device.json`; prints the mtbio
precision the set trains in (bf16 on a GPU or a CPU with bf16 in hardware, else no).

    python benchmarks/device/gpu_info.py --results-dir DIR [--peak-seconds S] [--dry-run] [--tiny-encoder PATH]

Without a CUDA device its `cuda` field says so ("no CUDA device", ": dry run" with `--dry-run`). `--tiny-encoder PATH`
also saves a 2-layer, 32-wide random BERT with the packaged MiniLM's vocabulary at PATH (the
dry run's stand-in for both encoders).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import machine, matmul_peaks, offline_environment, write_result  # noqa: E402

def device_info(peak_seconds: float, dry_run: bool = False) -> dict[str, Any]:
    """The machine, the device's name (or why there is none) and its fp32 and bf16 matmul peaks, measured now."""
    import torch

    info = machine()
    result: dict[str, Any] = {"machine": info, "matmul_peak_flops_per_second": matmul_peaks(peak_seconds),
                              "matmul_note": "a timed square matmul loop (8192 on a GPU, 2048 on a CPU) after two "
                                             "warm-up products"}
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        result.update(device=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                      device_memory_gb=properties.total_memory / 1e9, multiprocessors=properties.multi_processor_count)
    else:
        result.update(device="cpu", cuda="no CUDA device" + (": dry run" if dry_run else ""))
    result["precision"] = "bf16" if "bf16" in result["matmul_peak_flops_per_second"] else "no"
    return result


def tiny_encoder(path: Path) -> None:
    """A 2-layer, 32-wide random BERT with the packaged MiniLM's tokenizer, saved at `path`."""
    import torch
    from transformers import BertConfig, BertModel

    from mtbio.model.encoder import load_tokenizer

    tokenizer = load_tokenizer(None)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512)).save_pretrained(path)
    tokenizer.save_pretrained(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--peak-seconds", type=float, default=2.0)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--tiny-encoder", type=Path)
    args = parser.parse_args()
    offline_environment()
    result = device_info(args.peak_seconds, args.dry_run)
    if args.tiny_encoder:
        tiny_encoder(args.tiny_encoder)
    write_result("device", result, args.results_dir)
    print(result["precision"])


if __name__ == "__main__":
    main()
