"""Quality baseline: `mtbio finetune` against a plain Hugging Face `Trainer` on the same task.

Same encoder (the packaged MiniLM-L6 unless --encoder), same data (read by mtbio's readers),
same hyperparameters (1 epoch, batch 32, lr 5e-5, 10% linear warm-up, weight decay 0.01,
gradient clipping 1.0, max length 128, seed 42), same scorer (mtbio's metrics on dev).
The Trainer side uses `AutoModelForTokenClassification` / `AutoModelForSequenceClassification`
and its default collator, i.e. what a researcher would write by hand.

    python benchmarks/trainer_baseline.py --task bc5cdr-chem --data-dir ../shared/data
    python benchmarks/trainer_baseline.py --task ddi --data-dir ../shared/data

Writes benchmarks/results/trainer_baseline-<task>.json and prints a one-line summary.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mtbio.data.loading import read_split  # noqa: E402
from mtbio.evaluation.metrics import score_task  # noqa: E402
from mtbio.experiments.finetune import finetune  # noqa: E402
from mtbio.model.encoder import resolve_encoder_name  # noqa: E402
from mtbio.tasks.loading import load_catalog  # noqa: E402
from mtbio.training.config import RunConfig  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
HYPER = {"epochs": 1, "batch_size": 32, "lr": 5e-5, "warmup": 0.1, "weight_decay": 0.01, "max_length": 128, "seed": 42}


def machine() -> dict[str, Any]:
    flags = ""
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = " ".join(f for f in line.split(":", 1)[1].split() if f.startswith(("avx512", "amx")))
                break
    return {"cores": os.cpu_count(), "threads": torch.get_num_threads(), "cpu_flags": flags,
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform()}


def run_trainer(task: Any, data_dir: Path, encoder: str, out_dir: Path) -> dict[str, Any]:
    """Fine-tune with the plain HF Trainer; score dev with mtbio's metric."""
    from datasets import Dataset
    from transformers import (AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer,
                              DataCollatorForTokenClassification, DataCollatorWithPadding, Trainer, TrainingArguments)

    tokenizer = AutoTokenizer.from_pretrained(encoder)
    labels = task.label_list
    label_id = {label: i for i, label in enumerate(labels)}
    train = read_split(task, "train", data_dir)
    dev = read_split(task, "dev", data_dir)
    tagging = task.type == "tagging"

    def encode(examples: list[Any]) -> Dataset:
        if tagging:
            enc = tokenizer([e.tokens for e in examples], is_split_into_words=True, truncation=True,
                            max_length=HYPER["max_length"])
            all_labels = []
            for i, ex in enumerate(examples):
                previous, row = None, []
                for w in enc.word_ids(i):
                    row.append(-100 if w is None or w == previous else label_id[ex.label[w]])
                    previous = w
                all_labels.append(row)
            return Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                      "token_type_ids": enc["token_type_ids"], "labels": all_labels})
        texts = [e.text for e in examples]
        pairs = [e.text_b for e in examples] if task.is_pair else None
        enc = tokenizer(texts, pairs, truncation=True, max_length=HYPER["max_length"])
        return Dataset.from_dict({**{k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
                                  "labels": [label_id[e.label] for e in examples]})

    train_ds, dev_ds = encode(train), encode(dev)
    model_cls = AutoModelForTokenClassification if tagging else AutoModelForSequenceClassification
    torch.manual_seed(HYPER["seed"])
    model = model_cls.from_pretrained(encoder, num_labels=len(labels))
    collator = DataCollatorForTokenClassification(tokenizer) if tagging else DataCollatorWithPadding(tokenizer)
    args = TrainingArguments(output_dir=str(out_dir), per_device_train_batch_size=HYPER["batch_size"],
                             per_device_eval_batch_size=64, learning_rate=HYPER["lr"], warmup_steps=HYPER["warmup"],
                             weight_decay=HYPER["weight_decay"], num_train_epochs=HYPER["epochs"], seed=HYPER["seed"],
                             lr_scheduler_type="linear", max_grad_norm=1.0, save_strategy="no", report_to=[],
                             logging_steps=50, disable_tqdm=False, use_cpu=not torch.cuda.is_available())
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, data_collator=collator)
    start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - start
    logits = trainer.predict(dev_ds).predictions
    if tagging:
        predictions = []
        for i, ex in enumerate(dev):
            ids = np.asarray(logits[i]).argmax(-1)
            word_ids = tokenizer(ex.tokens, is_split_into_words=True, truncation=True,
                                 max_length=HYPER["max_length"]).word_ids()
            tags, previous = ["O"] * len(ex.tokens), None
            for position, w in enumerate(word_ids):
                if w is not None and w != previous:
                    tags[w] = labels[int(ids[position])]
                previous = w
            predictions.append(tags)
    else:
        predictions = [labels[int(i)] for i in np.asarray(logits).argmax(-1)]
    scores = score_task(task, [e.label for e in dev], predictions, [e.group for e in dev])
    real_tokens = int(sum(len(x) for x in train_ds["input_ids"]))
    return {"dev": scores, "train_seconds": train_seconds, "train_examples": len(train),
            "train_examples_per_second": len(train) / train_seconds,
            "train_real_tokens_per_second": real_tokens / train_seconds}


def run_mtbio(task: Any, data_dir: Path, encoder: str, out_dir: Path, mixed_precision: str) -> dict[str, Any]:
    config = RunConfig(tasks=[task.name], encoder=encoder, data_dir=str(data_dir), output=str(out_dir),
                       epochs=HYPER["epochs"], batch_size=HYPER["batch_size"], lr=HYPER["lr"], warmup=HYPER["warmup"],
                       weight_decay=HYPER["weight_decay"], max_length=HYPER["max_length"], seed=HYPER["seed"],
                       mixed_precision=mixed_precision)
    start = time.perf_counter()
    [(run_dir, results)] = finetune(config)
    return {"dev": results["dev"][task.name], "wall_seconds": time.perf_counter() - start,
            "train_examples_per_second": results["train_examples_per_second"],
            "train_real_tokens_per_second": results["train_tokens_per_second"], "run_dir": str(run_dir)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--data-dir", default=os.environ.get("MTBIO_DATA_DIR", "../shared/data"))
    parser.add_argument("--encoder", default=None)
    parser.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    parser.add_argument("--reuse-trainer", action="store_true",
                        help="Rerun only the mtbio side; take the Trainer side from the existing result file.")
    args = parser.parse_args()

    task = load_catalog().get(args.task)
    data_dir = Path(args.data_dir)
    encoder = resolve_encoder_name(args.encoder)
    result: dict[str, Any] = {"task": task.name, "metric": task.metric, "hyperparameters": HYPER,
                              "encoder": args.encoder or "minilm (packaged)", "machine": machine()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.mixed_precision == "no" else f"-{args.mixed_precision}"
    target = RESULTS / f"trainer_baseline-{task.name}{suffix}.json"
    previous = json.loads(target.read_text()) if args.reuse_trainer and target.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        result["mtbio"] = run_mtbio(task, data_dir, encoder, Path(tmp) / "mtbio", args.mixed_precision)
        if "trainer" in previous:
            result["trainer"] = previous["trainer"]
            result["trainer_reused_from_earlier_run"] = True
        target.write_text(json.dumps(result, indent=2) + "\n")  # keep the half we have if the other side fails
        if "trainer" not in result and not args.reuse_trainer:
            result["trainer"] = run_trainer(task, data_dir, encoder, Path(tmp) / "trainer")
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    m = result["mtbio"]["dev"][task.metric]
    summary = f"{task.name}: mtbio dev {task.metric} {m:.4f} ({result['mtbio']['train_examples_per_second']:.1f} ex/s)"
    if "trainer" in result:
        t = result["trainer"]["dev"][task.metric]
        result["difference_points"] = 100 * (m - t)
        result["speed_ratio"] = result["mtbio"]["train_examples_per_second"] / result["trainer"]["train_examples_per_second"]
        summary += (f" vs Trainer {t:.4f} ({result['trainer']['train_examples_per_second']:.1f} ex/s); "
                    f"difference {result['difference_points']:+.2f} points, speed ×{result['speed_ratio']:.2f}")
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(summary)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
