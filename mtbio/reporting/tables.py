"""`mtbio report`: the saved results of several runs as one paper-style table (markdown + CSV).

Each column is one argument: a run directory, a folder of run directories (`finetune/`), or a
folder of seed runs (`<task>/seed-<s>/`, written by `finetune --seeds K`). Rows are the tasks,
grouped by BLURB task type (NER, PICO, relation extraction, sentence similarity, document
classification, question answering; then NLI and other). A cell is the task's primary metric on
the chosen split, read from `results.json` (nothing is re-scored): mean ± sd over seeds, or the
single value. Two summary rows follow: the BLUE average (plain mean of the tasks) and the BLURB
score (mean within each type, then over types; BLURB types only). When every task of a column has
the same seeds, a summary is computed per seed and reported as mean ± sd; otherwise it is the
summary of the task means.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from mtbio.errors import MtbioError
from mtbio.evaluation.aggregate import BLURB_CATEGORIES, blue_average, blurb_score, mean_sd

CATEGORY_ORDER = ("ner", "pico", "relation", "similarity", "document", "qa", "nli", "other")
CATEGORY_NAMES = {"ner": "NER", "pico": "PICO", "relation": "Relation extraction", "similarity": "Sentence similarity",
                  "document": "Document classification", "qa": "Question answering", "nli": "NLI", "other": "Other"}
UNSCALED_METRICS = ("mse",)  # shown as is; every other metric is shown ×100


@dataclass
class TaskScores:
    """One task's primary score in one column: the value per seed."""

    task: str
    metric: str
    category: str
    by_seed: dict[int, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        values = list(self.by_seed.values())
        mean, sd = mean_sd(values)
        return {"mean": mean, "sd": sd if len(values) > 1 else None, "n": len(values), "seeds": sorted(self.by_seed)}


def run_dirs_under(path: Path) -> list[Path]:
    """A run directory (it has results.json), else those one or two levels down (task/ or task/seed-s/)."""
    path = Path(path)
    if (path / "results.json").is_file():
        return [path]
    found = sorted(p.parent for p in path.glob("*/results.json")) + sorted(p.parent for p in path.glob("*/*/results.json"))
    if not found:
        raise MtbioError(f"{path}: no results.json here or one or two levels down (not a finished run or folder of runs)")
    return found


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise MtbioError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise MtbioError(f"{path}: expected a mapping")
    return data


def read_run_scores(run_dir: Path, split: str) -> list[tuple[str, str, str, int, float]]:
    """(task, metric, category, seed, primary score) for every task of the run scored on `split`."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError) as exc:
        raise MtbioError(f"{run_dir / 'results.json'}: unreadable ({exc})") from None
    config_path = run_dir / "config.yaml"
    seed = int(_read_yaml(config_path).get("seed", 0)) if config_path.is_file() else 0
    rows = []
    for task, scores in (results.get(split) or {}).items():
        definition = _read_yaml(run_dir / "tasks" / f"{task}.yml")
        metric = str(definition.get("metric"))
        if metric not in scores:
            raise MtbioError(f"{run_dir / 'results.json'}: {split} scores of '{task}' lack its metric '{metric}'")
        rows.append((task, metric, str(definition.get("category", "other")), seed, float(scores[metric])))
    return rows


def collect_column(path: Path, split: str) -> dict[str, TaskScores]:
    """Task → scores per seed, over every run under `path`."""
    column: dict[str, TaskScores] = {}
    for run_dir in run_dirs_under(path):
        for task, metric, category, seed, value in read_run_scores(run_dir, split):
            entry = column.setdefault(task, TaskScores(task, metric, category))
            if seed in entry.by_seed:
                raise MtbioError(f"{path}: two runs of task '{task}' with seed {seed} (one column is one setting)")
            entry.by_seed[seed] = value
    if not column:
        raise MtbioError(f"{path}: no {split} scores in its results.json (run with --eval-test for test)")
    return column


def _aggregate(column: dict[str, TaskScores], how: str) -> dict[str, Any] | None:
    tasks = {t: s for t, s in column.items() if how == "blue" or s.category in BLURB_CATEGORIES}
    if not tasks:
        return None

    def score(values: dict[str, float]) -> float:
        if how == "blue":
            return blue_average(values)
        return blurb_score(values, {t: tasks[t].category for t in values})

    seed_sets = {tuple(sorted(s.by_seed)) for s in tasks.values()}
    if len(seed_sets) == 1 and len(next(iter(seed_sets))) > 1:  # the same seeds everywhere: per seed
        seeds = list(next(iter(seed_sets)))
        per_seed = [score({t: s.by_seed[seed] for t, s in tasks.items()}) for seed in seeds]
        mean, sd = mean_sd(per_seed)
        return {"mean": mean, "sd": sd, "n": len(seeds), "seeds": seeds}
    return {"mean": score({t: s.summary()["mean"] for t, s in tasks.items()}), "sd": None, "n": 1, "seeds": []}


def build_report(paths: Sequence[Path], split: str = "dev", labels: Sequence[str] = ()) -> dict[str, Any]:
    """The table as JSON-able data: columns, task rows (grouped by type) and the two summary rows."""
    if labels and len(labels) != len(paths):
        raise MtbioError(f"--label given {len(labels)} times for {len(paths)} runs; give one per run or none")
    names = [Path(p).name or str(p) for p in paths]
    if not labels:
        labels = names if len(set(names)) == len(names) else [str(p) for p in paths]
    columns = [collect_column(Path(p), split) for p in paths]
    info: dict[str, TaskScores] = {}
    for column in columns:
        for task, scores in column.items():
            info.setdefault(task, scores)
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    tasks = sorted(info, key=lambda t: (order.get(info[t].category, len(order)), t))
    rows = [{"task": t, "metric": info[t].metric, "category": info[t].category,
             "cells": [col[t].summary() if t in col else None for col in columns]} for t in tasks]
    return {
        "split": split,
        "columns": [{"label": label, "path": str(p), "tasks": sorted(col), "partial": len(col) < len(tasks)}
                    for label, p, col in zip(labels, paths, columns)],
        "rows": rows,
        "blue_average": [_aggregate(col, "blue") for col in columns],
        "blurb_score": [_aggregate(col, "blurb") for col in columns],
    }


def _fmt(cell: dict[str, Any] | None, scale: float) -> str:
    if cell is None:
        return "–"
    text = f"{cell['mean'] * scale:.2f}"
    return text + (f" ± {cell['sd'] * scale:.2f}" if cell["sd"] is not None else "")


def to_markdown(report: dict[str, Any]) -> str:
    """Markdown table: type | task (metric) | one column per run; scores ×100 (mse as is)."""
    labels = [c["label"] for c in report["columns"]]
    lines = [f"| type | task (metric) | {' | '.join(labels)} |", "|---|---|" + "---:|" * len(labels)]
    previous = None
    for row in report["rows"]:
        kind = CATEGORY_NAMES.get(row["category"], row["category"]) if row["category"] != previous else ""
        previous = row["category"]
        scale = 1.0 if row["metric"] in UNSCALED_METRICS else 100.0
        cells = [_fmt(c, scale) for c in row["cells"]]
        lines.append(f"| {kind} | {row['task']} ({row['metric']}) | {' | '.join(cells)} |")
    for key, title in (("blue_average", "BLUE average"), ("blurb_score", "BLURB score")):
        cells = [_fmt(c, 100.0) + (" †" if c is not None and col["partial"] else "")
                 for c, col in zip(report[key], report["columns"])]
        lines.append(f"| | **{title}** | {' | '.join(cells)} |")
    n_seeds = sorted({c["n"] for row in report["rows"] for c in row["cells"] if c is not None})
    seeds_text = "one run" if n_seeds == [1] else f"mean ± sd over {'/'.join(map(str, n_seeds))} seeds"
    notes = [f"{report['split']} split, primary metric ×100 ({seeds_text}; sd is the sample sd)."]
    if any(c["partial"] for c in report["columns"]):
        notes.append("† over the tasks this column has, not all rows.")
    notes += [f"- {c['label']}: `{c['path']}`" for c in report["columns"]]
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


def write_csv(report: dict[str, Any], path: Path) -> None:
    """One row per task and summary, per column: mean, sd, n (raw metric values, not ×100)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ["category", "task", "metric"]
    for column in report["columns"]:
        header += [f"{column['label']} mean", f"{column['label']} sd", f"{column['label']} n"]

    def cells(entries: list[dict[str, Any] | None]) -> list[Any]:
        out: list[Any] = []
        for c in entries:
            out += ["", "", 0] if c is None else [c["mean"], "" if c["sd"] is None else c["sd"], c["n"]]
        return out

    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in report["rows"]:
            writer.writerow([row["category"], row["task"], row["metric"], *cells(row["cells"])])
        writer.writerow(["", "BLUE average", "", *cells(report["blue_average"])])
        writer.writerow(["", "BLURB score", "", *cells(report["blurb_score"])])


def seed_summary(runs: Sequence[tuple[Path, dict[str, Any]]], split: str = "dev") -> str:
    """'task: metric mean ± sd over n seeds' for each task run under several seed directories; '' if none."""
    groups: dict[Path, list[Path]] = {}
    for run_dir, _ in runs:
        if run_dir.name.startswith("seed-"):
            groups.setdefault(run_dir.parent, []).append(run_dir)
    lines = []
    for parent, members in groups.items():
        if len(members) < 2:
            continue
        column = collect_column(parent, split)
        for task, scores in column.items():
            s = scores.summary()
            lines.append(f"{task}: {split} {scores.metric} {s['mean']:.4f} ± {s['sd']:.4f} over {s['n']} seeds "
                         f"({', '.join(map(str, s['seeds']))}) in {parent}")
    return "\n".join(lines)
