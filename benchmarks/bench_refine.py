"""Refinement throughput and padding: a 3-task `mtbio refine` (ChemProt, DDI, BC5CDR chem + disease).

Trains `--max-steps` steps (batch 32, max length 128) and reports the training throughput mtbio
measures itself (examples and real tokens per second; dev evaluation excluded), the useful
FLOP/s of those steps (real tokens only) and its fraction of the matmul peak measured in the same
run. Separately, without running the model, it counts padding over one full epoch of the mixer's
batch plan (the sampler built as the trainer builds it, with the tagging tasks packed when the run
packed them): padded tokens as a share of all tokens, overall and per task, against random batches
padded to their own longest example (what Hugging Face's collators do) and against padding every
example to 128.

    python benchmarks/bench_refine.py --data-dir ../shared/data
    python benchmarks/bench_refine.py --data-dir ../shared/data --encoder bert-base-random --mixed-precision bf16

Writes benchmarks/results/bench_refine.json and prints a one-line summary. The run ends with one
evaluation of the full dev sets (mtbio has no option to cap them): outside the throughput
figures, inside `wall_seconds`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common import (add_common_arguments, device, efficiency, machine, materialize_encoder, measure_peaks,
                    offline_environment, peak_memory_mb, write_result)

offline_environment()

from transformers import AutoConfig  # noqa: E402

from mtbio.data.collate import pad_multiple_for  # noqa: E402
from mtbio.data.mixer import Batch, MultiTaskBatchSampler, padding_fraction  # noqa: E402
from mtbio.data.pipeline import load_task_split  # noqa: E402
from mtbio.experiments.common import resolve_tasks  # noqa: E402
from mtbio.experiments.refine import refine  # noqa: E402
from mtbio.model.encoder import load_tokenizer  # noqa: E402
from mtbio.training.config import RunConfig  # noqa: E402
from mtbio.training.trainer import TrainerOptions, build_sampler  # noqa: E402

BATCH_SIZE, MAX_LENGTH = 32, 128
ACCEPTANCE = 0.10  # the issue: padded tokens at most 10% of all tokens in refine batches


def padding(config: RunConfig, lengths: Mapping[str, Sequence[int]], packed: Sequence[str]) -> dict[str, Any]:
    """Padded share of all tokens over epoch 0 of the mixer (each batch padded to its longest
    example, or packed for the `packed` tasks), per task, and the same for random batches and for
    padding to max length."""
    plan = build_sampler(TrainerOptions.of(config), lengths, packed).plan(0)
    rng = np.random.default_rng(config.seed)
    random_batches: list[Batch] = []
    for task, values in lengths.items():
        order = rng.permutation(len(values))
        random_batches += [(task, order[i : i + config.batch_size].tolist())
                           for i in range(0, len(order), config.batch_size)]
    real = sum(sum(values) for values in lengths.values())
    examples = sum(len(values) for values in lengths.values())
    return {
        "batches": len(plan),
        "examples": examples,
        "real_tokens": real,
        "packed_tasks": list(packed),
        "padded_fraction": padding_fraction(plan, lengths, pad_to_multiple_of=None, packed=packed),
        "padded_fraction_per_task": {task: padding_fraction([b for b in plan if b[0] == task], lengths,
                                                            pad_to_multiple_of=None, packed=packed) for task in lengths},
        # what the model actually sees: on a GPU mtbio's collator rounds widths up to a multiple of 8
        "padded_fraction_as_collated": padding_fraction(plan, lengths, pad_multiple_for(device()), packed=packed),
        "random_batches_padded_fraction": padding_fraction(random_batches, lengths, pad_to_multiple_of=None),
        "pad_to_max_length_fraction": 1 - real / (config.max_length * examples),
    }


def trained_batches(sampler: MultiTaskBatchSampler, steps: int) -> list[Batch]:
    """The first `steps` batches of the run (one batch per step, epoch after epoch)."""
    batches: list[Batch] = []
    epoch = 0
    while len(batches) < steps:
        batches += sampler.plan(epoch)
        epoch += 1
    return batches[:steps]


def bench(args: argparse.Namespace, peaks: dict[str, float], workdir: Path) -> dict[str, Any]:
    """Count the padding of one mixer epoch, then refine for `--max-steps` steps."""
    encoder = materialize_encoder(args.encoder, workdir)
    config = RunConfig(tasks=args.tasks.split(","), encoder=encoder, data_dir=str(args.data_dir),
                       output=str(workdir / "run"), task_defs=args.task_defs, max_steps=args.max_steps,
                       batch_size=BATCH_SIZE, max_length=MAX_LENGTH, mixed_precision=args.mixed_precision)
    tokenizer = load_tokenizer(encoder)
    lengths = {task.name: load_task_split(task, "train", args.data_dir, tokenizer, max_length=MAX_LENGTH).lengths
               for task in resolve_tasks(config)}  # featurized once here, from the cache in the run

    start = time.perf_counter()
    _, results = refine(config)
    wall = time.perf_counter() - start

    # mtbio reports rates; the replayed batches give the examples, tokens and FLOPs behind them
    pad = padding(config, lengths, results["packed_tasks"])
    batches = trained_batches(build_sampler(TrainerOptions.of(config), lengths, results["packed_tasks"]), results["steps"])
    real = [lengths[task][i] for task, indices in batches for i in indices]
    seconds = len(real) / results["train_examples_per_second"]
    if abs(sum(real) / seconds / results["train_tokens_per_second"] - 1) > 1e-6:
        raise SystemExit("error: the replayed batch plan does not match the tokens the run trained on")
    return {
        "tasks": results["tasks"], "steps": results["steps"], "train_examples": len(real),
        "train_real_tokens": sum(real), "train_seconds": seconds,
        "train_examples_per_second": results["train_examples_per_second"],
        "train_tokens_per_second": results["train_tokens_per_second"], "wall_seconds": wall,
        **efficiency(AutoConfig.from_pretrained(encoder), real, seconds, peaks, args.mixed_precision, training=True),
        "padding": pad,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="chemprot,ddi,bc5cdr", help="Comma-separated task names or aliases.")
    parser.add_argument("--max-steps", type=int, default=60, help="Training steps to time (default: 60).")
    add_common_arguments(parser)
    args = parser.parse_args()
    if not args.data_dir.is_dir():
        sys.exit(f"error: data directory {args.data_dir} not found; pass --data-dir or set MTBIO_DATA_DIR")

    peaks = measure_peaks(args.mixed_precision, args.peak_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        measured = bench(args, peaks, Path(tmp))
    pad = measured["padding"]
    result = {"encoder": args.encoder or "minilm (packaged)", "mixed_precision": args.mixed_precision,
              "batch_size": BATCH_SIZE, "max_length": MAX_LENGTH, "max_steps": args.max_steps, **measured,
              "acceptance": {"padded_fraction_at_most": ACCEPTANCE, "met": pad["padded_fraction"] <= ACCEPTANCE},
              "matmul_peaks": peaks, "peak_memory_mb": peak_memory_mb(), "machine": machine()}
    target = write_result("bench_refine", result, args.results_dir)
    print(f"refine {'+'.join(result['tasks'])}: {result['train_examples_per_second']:.1f} ex/s, "
          f"{result['train_tokens_per_second']:.0f} real tok/s, "
          f"{result['achieved_flops_per_second'] / 1e9:.1f} GFLOP/s = {result['fraction_of_peak']:.1%} of the "
          f"{result['precision']} peak; padded tokens {pad['padded_fraction']:.1%} of all "
          f"({'meets' if result['acceptance']['met'] else 'MISSES'} <= {ACCEPTANCE:.0%}; "
          f"{pad['padded_fraction_as_collated']:.1%} as collated to x8; random batches "
          f"{pad['random_batches_padded_fraction']:.1%}; pad to {MAX_LENGTH} {pad['pad_to_max_length_fraction']:.1%}) "
          f"-> {target}")


if __name__ == "__main__":
    main()
