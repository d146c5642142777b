"""Inference throughput: `mtbio predict` on a saved run against Hugging Face `Trainer.predict`.

On the dev split of each task (default BC5CDR-chem and DDI), with the same encoder weights and
eval batch 64 on both sides:

- mtbio: `mtbio.load(run_dir).predict(task, inputs)` on the dev examples as raw inputs (word
  lists, text pairs or texts); timed from raw input to decoded predictions, load time excluded.
  The run is made cheaply in a temporary directory by `finetune` with `max_steps=1`.
- Trainer: `AutoModelForTokenClassification` / `AutoModelForSequenceClassification` loaded from
  that run's encoder (untrained head: throughput only), the default collator
  (`DataCollatorForTokenClassification` / `DataCollatorWithPadding`), no labels; the dev examples
  tokenized as in bench_train.py with the task's max length; `trainer.predict` is timed,
  tokenization is not (it is reported as `tokenize_seconds`).

The sides alternate (mtbio, Trainer, mtbio, Trainer, ... `--repeats` times); medians are reported
with real (non-pad) tokens per second, useful FLOP/s and its fraction of the matmul peak measured
in the same run.

    python benchmarks/bench_infer.py --data-dir ../shared/data
    python benchmarks/bench_infer.py --data-dir ../shared/data --encoder bert-base-random --mixed-precision bf16

Writes benchmarks/results/bench_infer.json and prints a one-line summary.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from common import (add_common_arguments, efficiency, hf_model_and_collator, hf_tokenize, machine, materialize_encoder,
                    measure_peaks, offline_environment, peak_memory_mb, write_result)

offline_environment()

import torch  # noqa: E402
from transformers import AutoConfig  # noqa: E402

import mtbio  # noqa: E402
from mtbio.data.example import Example  # noqa: E402
from mtbio.data.loading import read_split  # noqa: E402
from mtbio.data.pipeline import featurize_raw, raw_inputs_to_examples  # noqa: E402
from mtbio.data.readers import is_pair_task  # noqa: E402
from mtbio.experiments.finetune import finetune  # noqa: E402
from mtbio.tasks.schema import TaskDef  # noqa: E402
from mtbio.training.config import RunConfig  # noqa: E402

EVAL_BATCH = 64


def raw_inputs(task: TaskDef, examples: Sequence[Example]) -> list[Any]:
    """Examples as `predict` takes raw inputs: word lists (tagging), (text, text_b) pairs, texts."""
    if task.type == "tagging":
        return [list(e.tokens) for e in examples]
    return [(e.text, e.text_b) if is_pair_task(task) else e.text for e in examples]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def saved_runs(args: argparse.Namespace, encoder: str, workdir: Path) -> dict[str, Path]:
    """One mtbio run directory per task, trained one step on one batch (the run only has to exist)."""
    config = RunConfig(tasks=args.tasks.split(","), encoder=encoder, data_dir=str(args.data_dir),
                       output=str(workdir / "runs"), task_defs=args.task_defs, max_steps=1, max_train_examples=32)
    return {results["tasks"][0]: run_dir for run_dir, results in finetune(config)}


def trainer_for(task: TaskDef, encoder: str, examples: Sequence[Example], bf16: bool,
                workdir: Path) -> tuple[Any, Any, float]:
    """The plain Hugging Face side: (trainer, tokenized dev set, tokenization seconds)."""
    from datasets import Dataset
    from transformers import AutoTokenizer, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(encoder)
    start = time.perf_counter()
    enc = hf_tokenize(tokenizer, task, examples, task.max_length)
    dataset = Dataset.from_dict({k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc})
    tokenize_seconds = time.perf_counter() - start
    model, collator = hf_model_and_collator(task, encoder, tokenizer)
    training_args = TrainingArguments(output_dir=str(workdir / "trainer"), per_device_eval_batch_size=EVAL_BATCH,
                                      bf16=bf16, report_to=[], disable_tqdm=True,
                                      use_cpu=not torch.cuda.is_available())
    return Trainer(model=model, args=training_args, data_collator=collator), dataset, tokenize_seconds


def rates(lengths: Sequence[int], seconds: float, encoder_config: Any, peaks: dict[str, float],
          mixed_precision: str) -> dict[str, Any]:
    """Examples, real tokens and useful FLOPs per second for `lengths` processed in `seconds`."""
    return {"examples": len(lengths), "real_tokens": sum(lengths), "seconds": seconds,
            "examples_per_second": len(lengths) / seconds, "real_tokens_per_second": sum(lengths) / seconds,
            **efficiency(encoder_config, lengths, seconds, peaks, mixed_precision, training=False)}


def bench_task(name: str, run_dir: Path, args: argparse.Namespace, peaks: dict[str, float],
               workdir: Path) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Alternate the two sides on one task's dev split; returns the task's result and each side's lengths."""
    run = mtbio.load(run_dir)
    run.batch_size = EVAL_BATCH
    task = run.tasks[name]
    examples = read_split(task, "dev", args.data_dir, max_examples=args.max_examples)
    inputs = raw_inputs(task, examples)
    bf16 = args.mixed_precision == "bf16"
    device = next(run.model.parameters()).device.type
    trainer, dataset, tokenize_seconds = trainer_for(task, str(run_dir / "encoder"), examples, bf16, workdir)

    def mtbio_predict() -> list[Any]:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            return run.predict(name, inputs)

    seconds: dict[str, list[float]] = {"mtbio": [], "trainer": []}
    for _ in range(args.repeats):
        elapsed, predictions = timed(mtbio_predict)
        seconds["mtbio"].append(elapsed)
        if len(predictions) != len(inputs):
            raise SystemExit(f"error: {name}: mtbio gave {len(predictions)} predictions for {len(inputs)} inputs")
        elapsed, output = timed(lambda: trainer.predict(dataset))
        seconds["trainer"].append(elapsed)
        if len(output.predictions) != len(inputs):
            raise SystemExit(f"error: {name}: Trainer gave {len(output.predictions)} predictions "
                             f"for {len(inputs)} inputs")

    lengths = {"mtbio": featurize_raw(task, raw_inputs_to_examples(task, inputs), run.tokenizer).lengths,
               "trainer": [len(ids) for ids in dataset["input_ids"]]}
    encoder_config = AutoConfig.from_pretrained(run_dir / "encoder")
    sides = {side: {"runs_seconds": seconds[side],
                    **rates(lengths[side], statistics.median(seconds[side]), encoder_config, peaks,
                            args.mixed_precision)}
             for side in seconds}
    sides["trainer"]["tokenize_seconds"] = tokenize_seconds
    result = {"max_length": task.max_length, "one_prediction_per_input": True, **sides,
              "ratio": sides["mtbio"]["examples_per_second"] / sides["trainer"]["examples_per_second"]}
    return result, lengths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="bc5cdr-chem,ddi", help="Comma-separated task names or aliases.")
    parser.add_argument("--repeats", type=int, default=2, help="Timed runs of each side, alternating (default: 2).")
    parser.add_argument("--max-examples", type=int, default=None, help="Use at most this many dev examples per task.")
    add_common_arguments(parser)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not args.data_dir.is_dir():
        sys.exit(f"error: data directory {args.data_dir} not found; pass --data-dir or set MTBIO_DATA_DIR")

    peaks = measure_peaks(args.mixed_precision, args.peak_seconds)
    tasks: dict[str, Any] = {}
    lengths: dict[str, list[int]] = {"mtbio": [], "trainer": []}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        encoder = materialize_encoder(args.encoder, workdir)
        for name, run_dir in saved_runs(args, encoder, workdir).items():
            tasks[name], task_lengths = bench_task(name, run_dir, args, peaks, workdir)
            for side in lengths:
                lengths[side] += task_lengths[side]
        encoder_config = AutoConfig.from_pretrained(encoder)
    # all tasks: every example once, in the sum of the per-task median times
    overall = {side: rates(lengths[side], sum(t[side]["seconds"] for t in tasks.values()), encoder_config, peaks,
                           args.mixed_precision) for side in lengths}
    overall["ratio"] = overall["mtbio"]["examples_per_second"] / overall["trainer"]["examples_per_second"]
    result = {"encoder": args.encoder or "minilm (packaged)", "mixed_precision": args.mixed_precision,
              "eval_batch_size": EVAL_BATCH, "repeats": args.repeats, "max_examples": args.max_examples,
              "tasks": tasks, "overall": overall, "matmul_peaks": peaks, "peak_memory_mb": peak_memory_mb(),
              "machine": machine()}
    target = write_result("bench_infer", result, args.results_dir)
    per_task = ", ".join(f"{name} x{t['ratio']:.2f}" for name, t in tasks.items())
    m, t = overall["mtbio"], overall["trainer"]
    print(f"inference: mtbio {m['examples_per_second']:.1f} ex/s ({m['real_tokens_per_second']:.0f} real tok/s, "
          f"{m['fraction_of_peak']:.1%} of the {m['precision']} peak) vs Trainer {t['examples_per_second']:.1f} ex/s "
          f"({t['real_tokens_per_second']:.0f} real tok/s, {t['fraction_of_peak']:.1%}); "
          f"mtbio/Trainer x{overall['ratio']:.2f} ({per_task}) -> {target}")


if __name__ == "__main__":
    main()
