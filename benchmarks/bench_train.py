"""Training speed and quality: `mtbio finetune` against a plain Hugging Face `Trainer`.

Same encoder (the packaged MiniLM-L6 unless --encoder; `bert-base-random` for a BERT-base-sized
config), same data (read by mtbio's readers), same hyperparameters (1 epoch, batch 32, the encoder's recipe
learning rate, e.g. the packaged MiniLM's 2e-4, where 5e-5 learned nothing in an epoch; 10% linear warm-up, weight
decay 0.01, clipping 1.0, max length 128, seeds 42, 43, ...; on the mtbio side none of its recipe's small-data
settings, SAME_AS_TRAINER), same scorer (mtbio's metric on dev). A quality difference is reported only between
sides that both learned: where either ends within a point of its trivial score (or below), `difference_points_*`
is null and `quality_refused_*` says why. The
Trainer side is what a researcher writes by hand: `AutoModelForTokenClassification` /
`AutoModelForSequenceClassification` and the default collator.

Per task and seed the sides alternate in one run: mtbio fp32, Trainer fp32, then mtbio in each
further precision (bf16 where the hardware has it). Each side runs in its own subprocess so its
peak memory is its own. Speeds are medians over seeds; dev scores are mean ± sd over seeds (one
epoch on one seed moves entity F1 by a few points, so compare quality with `--seeds 3` or more).
The matmul peak is measured in the same run, before and after the sides; the highest is used.

    python benchmarks/bench_train.py --data-dir ../shared/data                 # bc5cdr-chem and ddi
    python benchmarks/bench_train.py --tasks bc5cdr-chem --precisions no,bf16 --seeds 3
    python benchmarks/bench_train.py --tasks bc5cdr-chem --adapters none,lora --trainer-precisions none

With `--adapters none,lora` each mtbio precision also runs with a LoRA adapter on the frozen encoder (side
`mtbio+lora-<precision>`, the options' default rank): its speed, peak memory and dev score against full
fine-tuning in the same precision, and the disk one more task costs (its adapter and head against a
fine-tuned encoder and head).

With `--eager-attention` each mtbio precision also runs with attention's probabilities kept for the backward
pass at every length (side `mtbio+eager-<precision>`, mtbio before the lean path of
`mtbio.model.cpu_dropout`): the trade between memory and speed at long sequences,

    python benchmarks/bench_train.py --fixed-length 512 --max-train-examples 256 --eager-attention \
        --precisions no,bf16 --trainer-precisions no,bf16

With `--activation-checkpointing N` each mtbio precision also runs with every Nth encoder layer recomputed in the
backward pass (side `mtbio+recompute-<precision>`, mtbio's `--activation-checkpointing N`): its speed and peak
memory against the same precision without,

    python benchmarks/bench_train.py --fixed-length 512 --max-train-examples 256 --activation-checkpointing 1 \
        --precisions no --trainer-precisions no

With `--compiled-too` each side also runs compiled (sides `mtbio+compile-<precision>`: mtbio's `--compile`;
`trainer+compile-<precision>`: the Trainer's `torch_compile=True`), so eager and compiled share one call and one
file (tagged -compiled), with the compiled/eager ratios of each, whole-run and steady (after the warm-up steps,
where compilation happens):

    python benchmarks/bench_train.py --encoder bert-base-random --fixed-length 128 --batch-size 256 \
        --compiled-too --precisions bf16 --trainer-precisions bf16

Writes benchmarks/results/bench_train-<task>.json after every side and prints one line per task.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (RESULTS, device_tag, hf_model_and_collator, hf_tokenize, highest_peaks, machine,
                    materialize_encoder, matmul_peaks, offline_environment, peak_memory_mb, precision_name,
                    utilisation, write_fixed_length_task, write_result)

offline_environment()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from mtbio.training.flops import flops_per_sequence  # noqa: E402
from mtbio.training.trainer import warm_up_steps  # noqa: E402

HYPER = {"epochs": 1, "batch_size": 32, "lr": 5e-5, "warmup": 0.1, "weight_decay": 0.01, "max_length": 128}
# what the Trainer side does not do either, set on the mtbio side over its recipe's small-data settings: no step floor
# (a recipe's 200 steps would outrun the epoch), no LP-FT start, fixed thresholds, no no-training baselines
SAME_AS_TRAINER = {"min_steps": 1, "lp_ft": False, "thresholds": "fixed", "pair_form": "task", "baselines": False}
FIRST_SEED = 42
# mtbio batching (and compile) options given on the command line, and their result-file tags
BATCHING = {"bucket_window": "bw", "sub_batches": "sb", "packing": "pk", "compile": "co", "pad_multiple": "pm"}


def recipe_lr(encoder: str | None) -> float:
    """The learning rate mtbio's recipe for `encoder` trains at (`--recipe auto`), else HYPER's."""
    from mtbio.training.config import RunConfig

    return RunConfig(encoder=encoder).lr or HYPER["lr"]


def hyperparameters(args: argparse.Namespace) -> dict[str, Any]:
    """HYPER with this run's batch size, maximum length and learning rate (the encoder's recipe's unless given)."""
    lr = args.lr if args.lr is not None else recipe_lr(args.encoder)
    return {**HYPER, "lr": lr, "batch_size": args.batch_size, "max_length": args.max_length, "mtbio": SAME_AS_TRAINER}


def quality_refusal(sides: dict[str, dict[str, Any]], metric: str) -> str | None:
    """Why no quality difference between these sides is reported (one ends at its trivial score), else None."""
    from mtbio.evaluation.trivial import near_trivial

    for key, side in sides.items():
        trivial = side.get("trivial")
        if trivial is not None and near_trivial(side["dev_mean"], trivial, metric):
            return (f"{key} ends at its trivial score (dev {metric} {side['dev_mean']:.4f}, trivial {trivial:.4f}): "
                    "it learned nothing, so a difference in quality says nothing")
    return None


def batching(args: argparse.Namespace) -> dict[str, int | bool]:
    """The mtbio batching options given on the command line (the rest stay mtbio's defaults)."""
    return {key: getattr(args, key) for key in BATCHING if getattr(args, key) is not None}


def load_task(name: str, task_defs: list[str]) -> Any:
    from mtbio.tasks.loading import load_catalog

    return load_catalog(task_defs).get(name)


def read_examples(task: Any, split: str, data_dir: Path, limit: int | None) -> list[Any]:
    from mtbio.data.loading import read_split

    examples = read_split(task, split, data_dir)
    return examples[:limit] if limit else examples


# ---------------------------------------------------------------------------------- the two sides
def run_trainer(task: Any, data_dir: Path, encoder: str, out_dir: Path, precision: str,
                max_train_examples: int | None, seed: int, hyper: dict[str, Any],
                compiled: bool = False) -> dict[str, Any]:
    """Fine-tune with the plain HF Trainer (`torch_compile` when `compiled`); score dev with mtbio's metric."""
    from datasets import Dataset
    from transformers import AutoTokenizer, Trainer, TrainingArguments

    from mtbio.evaluation.metrics import score_task
    from mtbio.evaluation.trivial import trivial_score

    tokenizer = AutoTokenizer.from_pretrained(encoder)
    labels = task.label_list
    label_id = {label: i for i, label in enumerate(labels)}
    train = read_examples(task, "train", data_dir, max_train_examples)
    dev = read_examples(task, "dev", data_dir, None)
    tagging = task.type == "tagging"

    def encode(examples: list[Any]) -> tuple[Dataset, Any]:
        enc = hf_tokenize(tokenizer, task, examples, hyper["max_length"])
        if tagging:  # first sub-word of each word carries its tag; the rest are ignored (-100)
            targets = []
            for i, ex in enumerate(examples):
                previous, row = None, []
                for w in enc.word_ids(i):
                    row.append(-100 if w is None or w == previous else label_id[ex.label[w]])
                    previous = w
                targets.append(row)
        else:
            targets = [label_id[e.label] for e in examples]
        return Dataset.from_dict({**{k: enc[k] for k in enc.keys()}, "labels": targets}), enc

    (train_ds, _), (dev_ds, dev_enc) = encode(train), encode(dev)
    torch.manual_seed(seed)
    model, collator = hf_model_and_collator(task, encoder, tokenizer)
    args = TrainingArguments(output_dir=str(out_dir), per_device_train_batch_size=hyper["batch_size"],
                             per_device_eval_batch_size=64, learning_rate=hyper["lr"], warmup_steps=hyper["warmup"],
                             weight_decay=hyper["weight_decay"], num_train_epochs=hyper["epochs"], seed=seed,
                             lr_scheduler_type="linear", max_grad_norm=1.0, save_strategy="no", report_to=[],
                             logging_steps=50, bf16=precision == "bf16", fp16=precision == "fp16",
                             use_cpu=not torch.cuda.is_available(), torch_compile=compiled)
    clock = SteadyClock(warm_up_steps(math.ceil(len(train) / hyper["batch_size"])))
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, data_collator=collator, callbacks=[clock])
    start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - start
    steady_examples = len(train) - clock.warm_steps * hyper["batch_size"]
    logits = trainer.predict(dev_ds).predictions
    if tagging:
        predictions = []
        for i, ex in enumerate(dev):
            ids = np.asarray(logits[i]).argmax(-1)
            tags, previous = ["O"] * len(ex.tokens), None
            for position, w in enumerate(dev_enc.word_ids(i)):
                if w is not None and w != previous:
                    tags[w] = labels[int(ids[position])]
                previous = w
            predictions.append(tags)
    else:
        predictions = [labels[int(i)] for i in np.asarray(logits).argmax(-1)]
    scores = score_task(task, [e.label for e in dev], predictions, [e.group for e in dev])
    lengths = [len(x) for x in train_ds["input_ids"]]
    flops = [flops_per_sequence(model.config, n) for n in lengths]
    return {"dev": scores, "trivial": trivial_score(task, train, dev), "train_seconds": train_seconds,
            "train_examples": len(train),
            "train_examples_per_second": len(train) / train_seconds,
            "train_real_tokens_per_second": sum(lengths) / train_seconds,
            **({"steady_train_examples_per_second": steady_examples / (clock.end - clock.warm_end),
                "steady_after_steps": clock.warm_steps} if clock.warm_end and steady_examples > 0 else {}),
            "mean_train_length": float(np.mean(lengths)), "mean_train_flops_per_example": float(np.mean(flops))}


class SteadyClock(TrainerCallback):
    """Times the Trainer's steps after its first `warm_steps` (as mtbio's steady-state throughput)."""

    def __init__(self, warm_steps: int):
        self.warm_steps, self.warm_end, self.end = warm_steps, 0.0, 0.0

    def _now(self) -> float:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.warm_steps:
            self.warm_end = self._now()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.end = self._now()


def with_pooling(task: Any, pooling: str, directory: Path) -> tuple[Any, list[str]]:
    """`task` with its sentence head reading `pooling`, as a task definition in `directory`."""
    from mtbio.experiments.training_run import write_task_defs

    if pooling == task.pooling or task.type == "tagging":
        return task, []
    variant = task.model_copy(update={"name": f"{task.name}-{pooling}", "pooling": pooling})
    write_task_defs([variant], directory)
    return variant, [str(directory)]


def saved_bytes(run_dir: Path, adapter: str) -> int:
    """The weights one task adds to disk: its head (and adapter), plus the encoder when it was fine-tuned."""
    parts = [run_dir / "heads"] + ([run_dir / "encoder"] if adapter == "none" else [])
    return sum(f.stat().st_size for part in parts for f in part.rglob("*") if f.is_file())


def run_mtbio(task: Any, data_dir: Path, encoder: str, out_dir: Path, precision: str,
              max_train_examples: int | None, task_defs: list[str], seed: int, pooling: str,
              batching: dict[str, int | bool], hyper: dict[str, Any], adapter: str = "none") -> dict[str, Any]:
    from mtbio.experiments.finetune import finetune
    from mtbio.training.config import RunConfig, flat_values
    from mtbio.training.option_files import read_config_file

    task, extra_defs = with_pooling(task, pooling, out_dir / "task-defs")
    task_defs = task_defs + extra_defs
    config = RunConfig(tasks=[task.name], encoder=encoder, data_dir=str(data_dir), output=str(out_dir),
                       task_defs=task_defs, epochs=hyper["epochs"], batch_size=hyper["batch_size"], lr=hyper["lr"],
                       warmup=hyper["warmup"], weight_decay=hyper["weight_decay"], max_length=hyper["max_length"],
                       seed=seed, mixed_precision=precision, max_train_examples=max_train_examples, adapter=adapter,
                       **hyper["mtbio"], **batching)
    [(run_dir, results)] = finetune(config)
    head = json.loads((Path(run_dir) / "heads" / task.name / "head_config.json").read_text())
    saved = flat_values(read_config_file(Path(run_dir) / "config.yaml"), RunConfig)  # what the run really used
    return {"dev": results["dev"][task.name], "trivial": results["trivial"][task.name], "pooling": head["pooling"],
            "wall_seconds": results["wall_seconds"],
            "batching": {key: saved[key] for key in BATCHING}, "steps": results["steps"],
            "options": {key: saved[key] for key in SAME_AS_TRAINER},
            "train_examples_per_second": results["train_examples_per_second"],
            **{k: results[k] for k in ("steady_train_examples_per_second", "steady_after_steps") if k in results},
            "train_real_tokens_per_second": results["train_tokens_per_second"],
            "task_disk_bytes": saved_bytes(Path(run_dir), adapter)}


def child(args: argparse.Namespace) -> None:
    """One side in this process; writes its result (with its own peak memory) to --child-output."""
    task = load_task(args.tasks, args.task_defs)
    if args.side == "mtbio+eager":
        from mtbio.model import cpu_dropout

        cpu_dropout.LEAN_FROM_LENGTH = sys.maxsize
    with tempfile.TemporaryDirectory() as tmp:
        if args.side.startswith("trainer"):
            result = run_trainer(task, Path(args.data_dir), args.encoder, Path(tmp), args.precision,
                                 args.max_train_examples, args.seed, hyperparameters(args),
                                 compiled=args.side == "trainer+compile")
        else:
            options = {**batching(args), **({"activation_checkpointing": args.activation_checkpointing}
                                             if args.side == "mtbio+recompute" else {}),
                       **({"compile": True} if args.side == "mtbio+compile" else {})}
            result = run_mtbio(task, Path(args.data_dir), args.encoder, Path(tmp), args.precision,
                               args.max_train_examples, args.task_defs, args.seed, args.pooling, options,
                               hyperparameters(args), "lora" if args.side == "mtbio+lora" else "none")
    result["peak_memory_mb"] = peak_memory_mb()
    Path(args.child_output).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------- the parent
def run_side(args: argparse.Namespace, task: str, side: str, precision: str, seed: int, encoder: str,
             tmp: Path) -> dict:
    output = tmp / f"{task}-{side}-{precision}-{seed}.json"
    command = [sys.executable, __file__, "--side", side, "--precision", precision, "--tasks", task, "--seed", str(seed),
               "--encoder", encoder, "--data-dir", str(args.data_dir), "--child-output", str(output),
               "--pooling", args.pooling, "--batch-size", str(args.batch_size),
               "--max-length", str(args.max_length), "--lr", str(hyperparameters(args)["lr"])]
    if side == "mtbio+recompute":
        command += ["--activation-checkpointing", str(args.activation_checkpointing)]
    for key, value in batching(args).items():
        flag = f"--{key.replace('_', '-')}"
        command += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [flag, str(value)]
    for directory in args.task_defs:
        command += ["--task-defs", directory]
    if args.max_train_examples:
        command += ["--max-train-examples", str(args.max_train_examples)]
    print(f"[bench_train] {task}: {side} {precision_name(precision)} seed {seed}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    result = json.loads(output.read_text())
    result["process_seconds"] = time.perf_counter() - started
    return result


def aggregate(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """One side over seeds: median speeds and memory, dev mean ± sd, and the per-seed runs."""
    def median(key: str) -> float:
        return float(np.median([run[key] for run in runs]))

    scores = [run["dev"][metric] for run in runs]
    side = {"seeds": len(runs), "dev_mean": float(np.mean(scores)),
            "dev_sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else 0.0,
            "train_examples_per_second": median("train_examples_per_second"),
            "train_real_tokens_per_second": median("train_real_tokens_per_second"),
            "peak_memory_mb": max(run["peak_memory_mb"] for run in runs), "runs": runs}
    if "trivial" in runs[0]:  # the same data on every seed: one trivial score
        side["trivial"] = runs[0]["trivial"]
    if "task_disk_bytes" in runs[0]:
        side["task_disk_bytes"] = runs[0]["task_disk_bytes"]
    if all("steady_train_examples_per_second" in run for run in runs):
        side["steady_train_examples_per_second"] = median("steady_train_examples_per_second")
    if "mean_train_flops_per_example" in runs[0]:
        side["mean_train_flops_per_example"] = runs[0]["mean_train_flops_per_example"]
    return side


def summarise(task: Any, result: dict[str, Any], peaks: dict[str, float]) -> str:
    """Add FLOP/s, ratios and quality differences to `result`; return the one-line summary."""
    sides = result["sides"]
    per_example = next((s["mean_train_flops_per_example"] for k, s in sides.items() if k.startswith("trainer")), None)
    parts = [task.name]
    for key, side in sides.items():
        precision = key.split("-", 1)[1]
        if per_example:
            flops_per_second = side["train_examples_per_second"] * per_example
            peak = peaks.get(precision_name(precision), peaks["fp32"])
            side.update(utilisation(flops_per_second, 1.0, peak))
            if "steady_train_examples_per_second" in side:  # after the warm-up steps (compilation, autotuning)
                side["steady_fraction_of_peak"] = side["steady_train_examples_per_second"] * per_example / peak
        steady = (f" (steady {side['steady_train_examples_per_second']:.1f}, "
                  f"{side['steady_fraction_of_peak']:.1%} of peak)") if "steady_fraction_of_peak" in side else ""
        parts.append(f"{key} {side['train_examples_per_second']:.1f} ex/s{steady} dev {side['dev_mean']:.4f}"
                     f"±{side['dev_sd']:.4f}")
    for key, side in sides.items():  # mtbio against the Trainer in each precision both ran (no → fp32)
        trainer = sides.get(key.replace("mtbio-", "trainer-"))
        if not (key.startswith("mtbio-") and trainer):
            continue
        name = precision_name(key.split("-", 1)[1])
        result[f"speed_ratio_{name}"] = side["train_examples_per_second"] / trainer["train_examples_per_second"]
        refused = quality_refusal({key: side, key.replace("mtbio-", "trainer-"): trainer}, result["metric"])
        result[f"difference_points_{name}"] = None if refused else 100 * (side["dev_mean"] - trainer["dev_mean"])
        if refused:
            result[f"quality_refused_{name}"] = refused
        result[f"peak_memory_ratio_{name}"] = side["peak_memory_mb"] / trainer["peak_memory_mb"]
        quality = (f"quality not compared: {refused}" if refused
                   else f"{result[f'difference_points_{name}']:+.2f} pts")
        parts.append(f"mtbio/Trainer{'' if name == 'fp32' else ' ' + name} ×{result[f'speed_ratio_{name}']:.2f} "
                     f"({quality}), memory ×{result[f'peak_memory_ratio_{name}']:.2f}")
        if "steady_train_examples_per_second" in side and "steady_train_examples_per_second" in trainer:
            result[f"steady_speed_ratio_{name}"] = (side["steady_train_examples_per_second"]
                                                    / trainer["steady_train_examples_per_second"])
    base = sides.get("mtbio-no")
    for key, side in sides.items():
        if key.startswith("mtbio-") and key != "mtbio-no" and base:
            result[f"speedup_{key}_over_mtbio-no"] = side["train_examples_per_second"] / base["train_examples_per_second"]
            result[f"difference_points_{key}_vs_mtbio-no"] = 100 * (side["dev_mean"] - base["dev_mean"])
            parts.append(f"{key}/mtbio-no ×{result[f'speedup_{key}_over_mtbio-no']:.2f} "
                         f"({result[f'difference_points_{key}_vs_mtbio-no']:+.2f} pts)")
    # variants against their reference side in the same precision: (variant, reference, result key, label)
    for variant, reference, stem, label in (("mtbio", "mtbio+eager", "lean_vs_eager", "lean/eager attention"),
                                            ("mtbio+recompute", "mtbio", "recompute_vs_kept",
                                             "recomputed/kept activations"),
                                            ("mtbio+compile", "mtbio", "compiled_vs_eager", "compiled/eager mtbio"),
                                            ("trainer+compile", "trainer", "trainer_compiled_vs_eager",
                                             "compiled/eager Trainer")):
        for key, side in sides.items():
            other = sides.get(key.replace(f"{variant}-", f"{reference}-", 1))
            if not (key.startswith(f"{variant}-") and other):
                continue
            name = precision_name(key.split("-", 1)[1])
            ratios = result[f"{stem}_{name}"] = {
                "speedup": side["train_examples_per_second"] / other["train_examples_per_second"],
                "peak_memory_ratio": side["peak_memory_mb"] / other["peak_memory_mb"]}
            if "steady_train_examples_per_second" in side and "steady_train_examples_per_second" in other:
                ratios["steady_speedup"] = (side["steady_train_examples_per_second"]
                                            / other["steady_train_examples_per_second"])
            parts.append(f"{label} {name} ×{ratios['speedup']:.2f} speed, ×{ratios['peak_memory_ratio']:.2f} memory")
    for key, side in sides.items():  # LoRA against full fine-tuning in the same precision
        full = sides.get(key.replace("mtbio+lora-", "mtbio-"))
        if not (key.startswith("mtbio+lora-") and full):
            continue
        name = precision_name(key.split("-", 1)[1])
        lora = {"speedup": side["train_examples_per_second"] / full["train_examples_per_second"],
                "peak_memory_ratio": side["peak_memory_mb"] / full["peak_memory_mb"],
                "difference_points": 100 * (side["dev_mean"] - full["dev_mean"]),
                "task_disk_ratio": side["task_disk_bytes"] / full["task_disk_bytes"]}
        result[f"lora_vs_full_{name}"] = lora
        parts.append(f"LoRA/full {name} ×{lora['speedup']:.2f} speed, ×{lora['peak_memory_ratio']:.2f} memory, "
                     f"{lora['difference_points']:+.2f} pts, disk per task ×{lora['task_disk_ratio']:.3f} "
                     f"({side['task_disk_bytes'] / 1e6:.1f} MB vs {full['task_disk_bytes'] / 1e6:.1f} MB)")
    return "; ".join(parts)


def parent(args: argparse.Namespace) -> None:
    from mtbio.training.config import RunConfig, flat_fields

    info = machine()
    precisions = [p for p in args.precisions.split(",")
                  if p == "no" or (p != "none" and (torch.cuda.is_available() or info["cpu_bf16"]))]
    trainer_precisions = [p for p in args.trainer_precisions.split(",") if p != "none"]
    adapters = args.adapters.split(",")
    measured = [matmul_peaks(args.peak_seconds)]
    peaks = measured[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        encoder = materialize_encoder(args.encoder, tmp)
        if args.fixed_length:  # one synthetic task in place of --tasks
            from mtbio.model.encoder import load_tokenizer

            name, defs, data = write_fixed_length_task(tmp / "fixed", load_tokenizer(encoder), args.fixed_length,
                                                       args.max_train_examples or 16384)
            args.tasks, args.data_dir, args.task_defs = name, data, [*args.task_defs, str(defs)]
            args.max_length = args.fixed_length
        for name in args.tasks.split(","):
            task = load_task(name, args.task_defs)
            result: dict[str, Any] = {
                "task": task.name, "metric": task.metric, "hyperparameters": hyperparameters(args),
                "seeds": list(range(FIRST_SEED, FIRST_SEED + args.seeds)),
                "encoder": args.encoder or "minilm (packaged)", "max_train_examples": args.max_train_examples,
                "mtbio_pooling": task.pooling if task.type == "tagging" else args.pooling,
                "mtbio_batching": {**{k: flat_fields(RunConfig)[k].default for k in BATCHING}, **batching(args)},
                "machine": info, "matmul_peak_flops_per_second": peaks,
                "flops_note": "useful model FLOPs (real tokens of the train set) per second over the measured "
                              "matmul peak of the side's precision", "sides": {}}
            stem = f"bench_train-{task.name}" + (f"-{args.pooling}" if args.pooling != "cls" else "") + "".join(
                f"-{BATCHING[key]}{int(value)}" for key, value in batching(args).items())
            stem += (f"-b{args.batch_size}" if args.batch_size != HYPER["batch_size"] else "") + (
                f"-len{args.max_length}" if args.max_length != HYPER["max_length"] and not args.fixed_length else "")
            stem += ("-lora" if "lora" in adapters else "") + ("-eager" if args.eager_attention else "") + (
                f"-ac{args.activation_checkpointing}" if args.activation_checkpointing else "") + (
                "-compiled" if args.compiled_too else "") + device_tag()
            order = [*(("mtbio", p) for p in precisions if p == "no"), *(("trainer", p) for p in trainer_precisions),
                     *(("mtbio", p) for p in precisions if p != "no"),
                     *(("mtbio+lora", p) for p in precisions if "lora" in adapters),
                     *(("mtbio+eager", p) for p in precisions if args.eager_attention),
                     *(("mtbio+recompute", p) for p in precisions if args.activation_checkpointing),
                     *(("mtbio+compile", p) for p in precisions if args.compiled_too),
                     *(("trainer+compile", p) for p in trainer_precisions if args.compiled_too)]
            runs: dict[str, list[dict[str, Any]]] = {f"{side}-{p}": [] for side, p in order}
            for seed in range(FIRST_SEED, FIRST_SEED + args.seeds):
                for side, precision in order:
                    runs[f"{side}-{precision}"].append(run_side(args, task.name, side, precision, seed, encoder, tmp))
                    result["sides"] = {k: aggregate(v, task.metric) for k, v in runs.items() if v}
                    summarise(task, result, peaks)  # shares and ratios so far, against the first peak
                    write_result(stem, result, args.results_dir)  # keep what is done (a run stopped early)
            # measured again after the sides: a cold or busy machine reads low (641 against 1,550 GFLOP/s bf16
            # on one CPU), so every side is judged against the highest peak measured in the run
            measured.append(matmul_peaks(args.peak_seconds))
            result["matmul_peak_measurements"] = list(measured)
            peaks = result["matmul_peak_flops_per_second"] = highest_peaks(measured)
            line = summarise(task, result, peaks)
            target = write_result(stem, result, args.results_dir)
            print(f"{line} -> {target}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="bc5cdr-chem,ddi", help="Comma-separated task names.")
    parser.add_argument("--data-dir", default=os.environ.get("MTBIO_DATA_DIR", "../shared/data"))
    parser.add_argument("--task-defs", action="append", default=[], help="Extra task definition directory.")
    parser.add_argument("--encoder", default=None, help="Encoder path or name; `bert-base-random` for BERT-base.")
    parser.add_argument("--precisions", default="no,bf16",
                        help="mtbio precisions (no, bf16, fp16; none: no mtbio side); unsupported ones are skipped.")
    parser.add_argument("--trainer-precisions", default="no", help="Trainer precisions (no, bf16, fp16; none: no "
                        "Trainer side).")
    parser.add_argument("--adapters", default="none", help="none,lora: also train mtbio with a LoRA adapter per "
                        "precision (the mtbio+lora sides) and compare it with full fine-tuning.")
    parser.add_argument("--max-train-examples", type=int, default=None, help="Cap train examples (quick runs).")
    parser.add_argument("--pooling", choices=["cls", "pooler"], default="cls",
                        help="mtbio sentence heads: cls (mtbio's default) or pooler (the same head as the Trainer's "
                             "AutoModelForSequenceClassification); tags the result file -pooler.")
    parser.add_argument("--bucket-window", type=int, help="mtbio --bucket-window (1: random batches, as the Trainer's); "
                                                           "tags the result file -bw<N>.")
    parser.add_argument("--sub-batches", type=int, help="mtbio --sub-batches; tags the result file -sb<K>.")
    parser.add_argument("--packing", action=argparse.BooleanOptionalAction, default=None,
                        help="mtbio --packing/--no-packing (tagging tasks; on by default); --no-packing tags the "
                             "result file -pk0.")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="mtbio --compile (torch.compile the encoder); tags the result file -co1.")
    parser.add_argument("--pad-multiple", type=int, help="mtbio --pad-multiple (batch widths rounded up to a "
                        "multiple of N); tags the result file -pm<N>.")
    parser.add_argument("--batch-size", type=int, default=HYPER["batch_size"],
                        help="Train batch size of both sides; other than 32 tags the result file -b<N>.")
    parser.add_argument("--max-length", type=int, default=HYPER["max_length"],
                        help="Truncate texts at this many tokens, both sides (128; --fixed-length sets it).")
    parser.add_argument("--fixed-length", type=int,
                        help="Train on a synthetic task whose texts fill this many tokens (for GPU MFU at length "
                             "128) instead of --tasks; --max-train-examples sets its size (default 16384).")
    parser.add_argument("--seeds", type=int, default=1, help="Seeds 42, 43, ... per side (quality as mean ± sd).")
    parser.add_argument("--lr", type=float, default=None, help="Learning rate of both sides (default: the encoder's "
                        "mtbio recipe's, e.g. 2e-4 for the packaged MiniLM).")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--peak-seconds", type=float, default=2.0,
                        help="How long each matmul peak measurement runs (default: 2).")
    parser.add_argument("--eager-attention", action="store_true",
                        help="Also run mtbio with eager attention at every length (side mtbio+eager).")
    parser.add_argument("--activation-checkpointing", type=int, default=0, metavar="N",
                        help="Also run mtbio with every Nth encoder layer recomputed in the backward pass (side "
                             "mtbio+recompute); tags the result file -ac<N>.")
    parser.add_argument("--compiled-too", action="store_true",
                        help="Also run each side compiled (sides mtbio+compile, trainer+compile); tags the result "
                             "file -compiled.")
    parser.add_argument("--side", choices=["mtbio", "mtbio+lora", "mtbio+eager", "mtbio+recompute", "mtbio+compile",
                                           "trainer", "trainer+compile"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="no", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=FIRST_SEED, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
