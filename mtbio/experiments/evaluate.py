"""Scoring saved runs on dev or test: one row per run (or per folder of fine-tuned runs), one
column per task, plus the BLUE-style average and the BLURB score where the tasks allow.

`mtbio evaluate runs/single-task runs/refine/X runs/refine/X/finetune` gives the layout of
seed 004 Table 3: single-task, refinement and fine-tune rows. A folder of seed runs
(`finetune --seeds K`) is one row whose cells are mean ± sd over the seeds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from mtbio.data.example import Example
from mtbio.data.pipeline import load_task_split
from mtbio.evaluation.aggregate import benchmark_summaries, mean_sd
from mtbio.evaluation.breakdown import TypeCounts, format_type_table, per_type_counts
from mtbio.evaluation.metrics import score_task
from mtbio.experiments.predict import load_run
from mtbio.fileio import open_for_write, write_json
from mtbio.model.inference import autocast_for, predict_split
from mtbio.tasks.loading import load_catalog, load_run_tasks, require_data
from mtbio.tasks.schema import TaskDef
from mtbio.run_dir import RunDir

STAGE_LABELS = {"single-task": "single-task", "refine": "refinement", "finetune": "fine-tune"}


@dataclass
class EvaluationRow:
    name: str
    stage: str
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # task → metric → value (mean over seeds)
    primary: dict[str, float] = field(default_factory=dict)  # mean over seeds
    primary_sd: dict[str, float] = field(default_factory=dict)  # sd over seeds, for tasks run with several
    seed_scores: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    precision: str | None = None  # what the row was scored in (None: scores read from results.json)
    subset: int | None = None  # scored on a fixed subset of at most this many examples per task

    def add(self, task: str, scores: dict[str, float], metric: str) -> None:
        """One run's scores; several runs of a task (seeds) are summarised as mean (and sd)."""
        self.seed_scores.setdefault(task, []).append(scores)
        runs = self.seed_scores[task]
        self.scores[task] = {k: mean_sd([r[k] for r in runs])[0] for k in scores}
        self.primary[task], sd = mean_sd([r[metric] for r in runs])
        if len(runs) > 1:
            self.primary_sd[task] = sd

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "scores": self.scores, "primary": self.primary,
                "primary_sd": self.primary_sd, "n_runs": {t: len(r) for t, r in self.seed_scores.items()},
                "precision": self.precision, "max_eval_examples": self.subset}


def _stage_of(run: Path) -> str:
    if RunDir(run).finished:
        return str(RunDir(run).results().get("stage", "unknown"))
    return "unknown"


def evaluate_paths(
    paths: Sequence[Path],
    split: str,
    data_dir: Path | None,
    tasks: Sequence[str] = (),
    batch_size: int = 64,
    rescore: bool = True,
    precision: str = "auto",
    save_predictions: bool = False,
    max_examples: int | None = None,
) -> dict[str, Any]:
    """Score every run under `paths` on `split`; returns the table as JSON-able data.

    `rescore=False` takes the scores each run saved in results.json (the same weights, so the
    same numbers) instead of reloading the model and predicting again. `precision`: as `load_run`'s;
    the table records what each row ran in. `max_examples`: score a fixed subset of at most this many
    examples per task (default: the subset each run was trained with, if any). `save_predictions`: each run's predictions go to
    `<run>/predictions/<split>-<task>.jsonl`, and tagging and classification tasks get a per-type
    table (`<split>-<task>.types.json`, also under the table's `types`).
    """
    rows: list[EvaluationRow] = []
    categories: dict[str, str] = {}
    type_tables: dict[str, TypeCounts] = {}
    for path in paths:
        runs = [run.path for run in RunDir.find(path, weights=True)]
        stage = _stage_of(runs[0])
        row = EvaluationRow(name=str(path), stage=STAGE_LABELS.get(stage, stage))
        for run_dir in runs:
            limit = max_examples or (RunDir(run_dir).results().get("max_eval_examples") if RunDir(run_dir).finished else None)
            row.subset = max(row.subset or 0, limit or 0) or None
            if not rescore:
                saved = RunDir(run_dir).results().get(split, {})
                for name, task in load_run_tasks(run_dir).items():
                    if name in saved and (not tasks or name in tasks):
                        row.add(name, saved[name], task.metric)
                        categories[name] = task.category
                continue
            run = load_run(run_dir, precision)
            row.precision = run.precision
            device = next(run.model.parameters()).device
            for name, task in run.tasks.items():
                if tasks and name not in tasks:
                    continue
                require_data(task, data_dir)
                assert data_dir is not None
                data = load_task_split(task, split, data_dir, run.tokenizer, limit)
                predictions = predict_split(run.model, name, data, int(run.tokenizer.pad_token_id or 0), batch_size, device,
                                            autocast=autocast_for(run.precision, device))
                scores = score_task(task, [e.label for e in data.examples], predictions, [e.group for e in data.examples])
                row.add(name, scores, task.metric)
                if save_predictions:
                    types = write_predictions(run_dir, split, task, data.examples, predictions)
                    if types is not None:
                        type_tables[f"{run_dir} {name}"] = types
                categories[name] = task.category
            del run
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        rows.append(row)
    columns = list(dict.fromkeys(t for r in rows for t in r.primary))
    domains = load_catalog().domains
    table: dict[str, Any] = {"split": split, "tasks": columns, "rows": []}
    if type_tables:
        table["types"] = type_tables
    for row in rows:
        entry = row.to_json()
        summaries = benchmark_summaries(row.primary, categories, domains.get("blue", []), domains.get("blurb", []))
        for key in ("average", "blue", "blurb"):
            entry[key] = summaries[key]["value"] if key in summaries else None
            entry[f"{key}_missing"] = summaries[key]["missing"] if key in summaries else []
        table["rows"].append(entry)
    return table


def write_predictions(run_dir: Path, split: str, task: TaskDef, examples: Sequence[Example],
                      predictions: Sequence[Any]) -> TypeCounts | None:
    """`<run>/predictions/<split>-<task>.jsonl` (uid, each input field the task's kind declares, gold, prediction
    per example) and, for tagging and classification tasks, the per-type table beside it; returns that table."""
    target = run_dir / "predictions"
    fields = [f.name for f in task.kind.inputs.input_fields]
    with open_for_write(target / f"{split}-{task.name}.jsonl") as handle:
        for example, prediction in zip(examples, predictions):
            inputs = {name: example.inputs.get(name) for name in fields}
            record = {"uid": example.uid, **inputs, "gold": example.label, "prediction": prediction}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    if task.kind.typed_items(task, []) is None:  # the kind has no per-type table
        return None
    types = per_type_counts(task, [e.label for e in examples], predictions)
    write_json(target / f"{split}-{task.name}.types.json", types)
    return types


def format_evaluation_table(table: dict[str, Any]) -> str:
    """A plain-text table: rows = runs, columns = tasks, then the plain average, the BLUE average and
    the BLURB score (each over its own benchmark's tasks; `*` marks a partial one, listed below)."""
    tasks = table["tasks"]
    header = ["run", "stage", *tasks, "avg", "blue", "blurb"]
    lines = [header]
    partial: dict[str, set[str]] = {}
    for row in table["rows"]:
        cells = [row["name"], row["stage"]]
        sds = row.get("primary_sd", {})
        cells += [(f"{row['primary'][t]:.4f}" + (f" ± {sds[t]:.4f}" if t in sds else "")) if t in row["primary"]
                  else "-" for t in tasks]
        for key in ("average", "blue", "blurb"):
            missing = row.get(f"{key}_missing") or []
            partial.setdefault(key, set()).update(missing)
            cells.append("-" if row.get(key) is None else f"{row[key]:.4f}" + ("*" if missing else ""))
        lines.append(cells)
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    names = {"blue": "BLUE average", "blurb": "BLURB score"}
    out += [f"* {names[k]} partial: missing {', '.join(sorted(v))}" for k, v in partial.items() if v and k in names]
    out.append("avg: plain mean of the row's tasks; blue/blurb: over BLUE's / BLURB's own tasks only")
    out += [f"{row['name']}: scored on a fixed subset of at most {row['max_eval_examples']} {table['split']} examples "
            "per task (--max-eval-examples), not the whole split" for row in table["rows"] if row.get("max_eval_examples")]
    for name, types in table.get("types", {}).items():
        out.append("\n" + format_type_table(name, types))
    return "\n".join(out)

