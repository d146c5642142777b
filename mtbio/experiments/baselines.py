"""`mtbio tasks baselines`: each task's scores before any training, on one split: the trivial
predictor's and the encoder's no-training baselines (`mtbio.model.probes`)."""
from __future__ import annotations

from typing import Any

from mtbio.data.loading import read_split
from mtbio.evaluation.trivial import trivial_score
from mtbio.experiments.common import data_dir_for, resolve_tasks
from mtbio.logs import run_log
from mtbio.model.encoder import load_encoder, load_tokenizer, resolve_encoder_name
from mtbio.model.probes import no_training_scores
from mtbio.tasks.loading import require_data
from mtbio.training.config import RunConfig

COLUMNS = ("trivial", "cosine-mean", "cosine-cls", "probe")


def no_training_table(config: RunConfig, split: str = "dev") -> dict[str, Any]:
    """{"encoder", "split", "rows": [{task, metric, trivial, cosine-mean, cosine-cls, probe, train_examples}]};
    a baseline a task does not have is None. `--max-train-examples` caps what the fitted baselines see,
    `--max-eval-examples` what is scored (a fixed subset)."""
    tasks = resolve_tasks(config)
    data_dir = data_dir_for(config)
    encoder_name = resolve_encoder_name(config.encoder)
    encoder, tokenizer = load_encoder(encoder_name), load_tokenizer(encoder_name)
    rows = []
    with run_log():
        for task in tasks:
            require_data(task, data_dir)
            assert data_dir is not None
            train = read_split(task, "train", data_dir, config.max_train_examples)
            scored = read_split(task, split, data_dir, config.max_eval_examples)
            found = {"trivial": {task.metric: trivial_score(task, train, scored)},
                     **no_training_scores(task, encoder, tokenizer, train, scored, config.max_length)}
            rows.append({"task": task.name, "metric": task.metric, "train_examples": len(train),
                         "scored_examples": len(scored),
                         **{name: found[name][task.metric] if name in found else None for name in COLUMNS}})
    return {"encoder": config.encoder or f"the packaged MiniLM-L6 ({encoder_name})", "split": split,
            "max_eval_examples": config.max_eval_examples, "rows": rows}


def format_table(table: dict[str, Any]) -> str:
    """Aligned text: one row per task, the primary metric of each baseline."""
    header = ["task", "metric", *COLUMNS, "train"]
    lines = [header] + [[r["task"], r["metric"], *("–" if r[c] is None else f"{r[c]:.4f}" for c in COLUMNS),
                         str(r["train_examples"])] for r in table["rows"]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
    subset = f", a fixed subset of at most {table['max_eval_examples']} examples per task" \
        if table.get("max_eval_examples") else ""
    return f"{text}\n\nno-training baselines of {table['encoder']} on {table['split']}{subset} (train: examples the " \
           "fitted baselines saw)"

