"""Long documents on a CPU: peak memory of `mtbio finetune` (2 steps, batch 1) and `mtbio predict` at 512, 4,096 and
8,192 tokens, with a tiny-width, full-length ModernBERT (2 layers, hidden 64, 8,192 positions, global attention in
every layer, random weights built here), for each attention implementation (`sdpa`, transformers' default, and
`eager`, the score matrix in full). Each measurement runs in its own process; its peak resident memory is that
process's `ru_maxrss`. The documents are synthetic (a two-class task whose label is its last word) so every length is
filled.

    python benchmarks/bench_long.py [--lengths 512,4096,8192] [--impls sdpa,eager]

Writes benchmarks/results/bench_long.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from common import RESULTS, machine, offline_environment, write_result

offline_environment()


def build(directory: Path, positions: int) -> tuple[Path, Path]:
    """A tiny ModernBERT with the packaged MiniLM vocabulary, and a long-document task (definition, data)."""
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    from mtbio.model.encoder import default_encoder_path
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_encoder_path())
    tokenizer.model_max_length = positions
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=128, max_position_embeddings=positions,
                              global_attn_every_n_layers=1, pad_token_id=tokenizer.pad_token_id,
                              cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                              bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    encoder = directory / "encoder"
    ModernBertModel(config).save_pretrained(encoder)
    tokenizer.save_pretrained(encoder)
    words = ["patient", "dose", "tumour", "renal", "acute", "therapy", "trial", "outcome"]
    rng = random.Random(0)
    data = directory / "data"
    data.mkdir()
    for split, count in (("train", 4), ("dev", 2)):
        with open(data / f"{split}.jsonl", "w") as handle:
            for i in range(count):
                label = "pos" if i % 2 else "neg"
                text = " ".join(rng.choice(words) for _ in range(positions)) + f" {label}"
                handle.write(json.dumps({"text": text, "label": label}) + "\n")
    definition = directory / "defs" / "long-doc.yml"
    definition.parent.mkdir()
    definition.write_text(f"name: long-doc\ntype: classification\nformat: jsonl\ncolumns: {{text: text, label: label}}\nfiles: {{train: train.jsonl, dev: "
                          f"dev.jsonl}}\nlabels: [neg, pos]\nmetric: accuracy\nmax_length: {positions}\n")
    return encoder, definition


PEAK = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stderr.write(done.stderr[-3000:]); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def peak_mb(command: list[str]) -> float:
    """Run `command` as the only child of a fresh process and return its peak resident memory (MB)."""
    done = subprocess.run([sys.executable, "-c", PEAK, *command], capture_output=True, text=True)
    code, kilobytes = done.stdout.split()[-2:]
    if code != "0":
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return int(kilobytes) / 1024


def measure(length: int, impl: str, workdir: Path) -> dict[str, float]:
    encoder, definition = build(workdir, length)
    config = json.loads((encoder / "config.json").read_text())
    config["attn_implementation"] = impl
    (encoder / "config.json").write_text(json.dumps(config))
    mtbio = [sys.executable, "-m", "mtbio"]
    train = peak_mb([*mtbio, "finetune", "--task", "long-doc", "--task-defs", str(definition.parent), "--data-dir",
                     str(workdir / "data"), "--encoder", str(encoder), "--max-steps", "2", "--batch-size", "1",
                     "--eval-batch-size", "1", "--no-baselines", "--output", str(workdir / "run")])
    texts = workdir / "in.txt"
    texts.write_text("\n".join(json.loads(line)["text"] for line in (workdir / "data" / "dev.jsonl").read_text()
                               .splitlines()) + "\n")
    predict = peak_mb([*mtbio, "predict", str(workdir / "run" / "long-doc"), "--task", "long-doc", "--input",
                       str(texts)])
    return {"finetune_peak_mb": train, "predict_peak_mb": predict}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,4096,8192")
    parser.add_argument("--impls", default="sdpa,eager")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # LENGTH:IMPL, measured in this process (a child's run)
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.one:
        length, impl = args.one.split(":")
        with tempfile.TemporaryDirectory() as workdir:
            print(json.dumps(measure(int(length), impl, Path(workdir))))
        return
    rows = []
    for length in [int(x) for x in args.lengths.split(",")]:
        for impl in args.impls.split(","):
            done = subprocess.run([sys.executable, __file__, "--one", f"{length}:{impl}"], capture_output=True,
                                  text=True, env={**os.environ})
            if done.returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            rows.append({"tokens": length, "attention": impl, **json.loads(done.stdout.strip().splitlines()[-1])})
            print(f"{length:>5} tokens, {impl:5s}: finetune {rows[-1]['finetune_peak_mb']:.0f} MB, predict "
                  f"{rows[-1]['predict_peak_mb']:.0f} MB", flush=True)
    path = write_result("bench_long", {"machine": machine(), "encoder": "tiny ModernBERT (2 layers, hidden 64)",
                                       "batch_size": 1, "rows": rows}, args.results_dir)
    print(f"written: {path}")


if __name__ == "__main__":
    main()
