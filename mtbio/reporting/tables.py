"""`mtbio report`: the saved results of several runs as one paper-style table (markdown + CSV).

Each column is one argument: a run directory, a folder of run directories (`finetune/`), or a
folder of seed runs (`<task>/seed-<s>/`, written by `finetune --seeds K`). Rows are the tasks,
grouped by BLURB task type (NER, PICO, relation extraction, sentence similarity, document
classification, question answering; then NLI and other). A cell is the task's primary metric on
the chosen split, read from `results.json` (nothing is re-scored): mean ± sd over seeds, or the
single value. Three summary rows follow, each over the tasks it is defined on: the plain average
of every task in the column, the BLUE average over BLUE's ten tasks and the BLURB score over
BLURB's 13 (mean within each type, then over types); a BLUE or BLURB summary that lacks some of
its benchmark's tasks is marked partial and the missing tasks are listed. When every task of a
summary has the same seeds, it is computed per seed and reported as mean ± sd; otherwise it is the
summary of the task means.

Optional extras: a `trivial` column (each task's score without learning: majority class, all `O`;
see `mtbio.evaluation.trivial`) and a verdict column comparing the last column with a baseline
column per task, with the noise-aware rule of `pairwise` (`mtbio.reporting.relations.judge`).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from mtbio.errors import MtbioError
from mtbio.evaluation.aggregate import benchmark_summaries, mean_sd
from mtbio.evaluation.metrics import metric_scale
from mtbio.evaluation.trivial import NEAR_TRIVIAL, near_trivial
from mtbio.fileio import open_for_write
from mtbio.reporting.verdicts import Rule, compare, correct, verdict_text
from mtbio.run_dir import PackedCell, RunDir, saved_cell
from mtbio.tasks.loading import saved_task_fields

CATEGORY_ORDER = ("ner", "pico", "relation", "similarity", "document", "qa", "nli", "other")
CATEGORY_NAMES = {"ner": "NER", "pico": "PICO", "relation": "Relation extraction", "similarity": "Sentence similarity",
                  "document": "Document classification", "qa": "Question answering", "nli": "NLI", "other": "Other"}


@dataclass
class TaskScores:
    """One task's primary score in one column: the value per seed."""

    task: str
    metric: str
    category: str
    declared: str  # the primary metric the run recorded before it trained
    by_seed: dict[int, float] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        values = list(self.by_seed.values())
        mean, sd = mean_sd(values)
        return {"mean": mean, "sd": sd if len(values) > 1 else None, "n": len(values), "seeds": sorted(self.by_seed)}


def eval_subset(path: Path) -> int | None:
    """The largest --max-eval-examples of the runs under `path` (None: every run scored whole splits)."""
    return max((_saved(r.path).results().get("max_eval_examples") or 0 for r in RunDir.find(path)), default=0) or None


def _saved(run_dir: Path) -> RunDir | PackedCell:
    """A finished run: its directory, or its line of a study's cells.jsonl once the directory is gone."""
    return saved_cell(run_dir) or RunDir(run_dir)


def read_run_scores(run_dir: Path, split: str,
                    metrics: Mapping[str, str] | None = None) -> list[tuple[str, str, str, str, int, float]]:
    """(task, metric, declared metric, category, seed, score) for every task of the run scored on `split`:
    the task's primary (declared) metric, or the one `metrics` names (any metric the run saved)."""
    results = _saved(run_dir).results()
    seed = int(_saved(run_dir).config().get("seed", results.get("seed", 0)))  # a merged run has no config.yaml
    rows = []
    for task, scores in (results.get(split) or {}).items():
        definition = saved_task_fields(run_dir, task)
        declared = str(definition.get("metric"))
        metric = (metrics or {}).get(task) or declared
        if metric not in scores:
            raise MtbioError(f"{RunDir(run_dir).results_file}: {split} scores of '{task}' lack the metric '{metric}' "
                             f"(saved: {', '.join(sorted(scores))})")
        rows.append((task, metric, declared, str(definition.get("category", "other")), seed, float(scores[metric])))
    return rows


def collect_column(path: Path, split: str, metrics: Mapping[str, str] | None = None) -> dict[str, TaskScores]:
    """Task → scores per seed, over every run under `path` (primary metrics, or those `metrics` names)."""
    column: dict[str, TaskScores] = {}
    for run_dir in (run.path for run in RunDir.find(path)):
        for task, metric, declared, category, seed, value in read_run_scores(run_dir, split, metrics):
            entry = column.setdefault(task, TaskScores(task, metric, category, declared))
            if seed in entry.by_seed:
                raise MtbioError(f"{path}: two runs of task '{task}' with seed {seed} (one column is one setting)")
            entry.by_seed[seed] = value
    if not column:
        raise MtbioError(f"{path}: no {split} scores in its results.json (run with --eval-test for test)")
    return column


SUMMARY_TITLES = {"average": "average (plain mean, all tasks)", "blue": "BLUE average", "blurb": "BLURB score"}


def _aggregate(column: dict[str, TaskScores], benchmarks: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Each summary of `benchmark_summaries`, as mean ± sd over seeds when its tasks share the seeds."""
    categories = {t: s.category for t, s in column.items()}
    means = {t: s.summary()["mean"] for t, s in column.items()}
    summaries = benchmark_summaries(means, categories, benchmarks["blue"], benchmarks["blurb"])
    out: dict[str, dict[str, Any]] = {}
    for key, summary in summaries.items():
        tasks = list(summary["tasks"])  # type: ignore[call-overload]
        entry = {"mean": summary["value"], "sd": None, "n": 1, "seeds": [], "tasks": tasks,
                 "missing": summary["missing"]}
        seed_sets = {tuple(sorted(column[t].by_seed)) for t in tasks}
        if len(seed_sets) == 1 and len(next(iter(seed_sets))) > 1:  # the same seeds everywhere: per seed
            seeds = list(next(iter(seed_sets)))
            per_seed = [benchmark_summaries({t: column[t].by_seed[seed] for t in tasks}, categories,
                                            benchmarks["blue"], benchmarks["blurb"])[key]["value"] for seed in seeds]
            mean, sd = mean_sd([float(v) for v in per_seed])  # type: ignore[arg-type]
            entry.update(mean=mean, sd=sd, n=len(seeds), seeds=seeds)
        out[key] = entry
    return out


def _benchmarks() -> dict[str, list[str]]:
    from mtbio.tasks.loading import load_catalog

    domains = load_catalog().domains
    return {"blue": list(domains.get("blue", [])), "blurb": list(domains.get("blurb", []))}


def _verdicts(rows: list[dict[str, Any]], columns: list[dict[str, TaskScores]], baseline: int,
              column: int) -> list[dict[str, Any] | None]:
    """Per task: column `column` against column `baseline`, per seed, judged as `pairwise` judges edges."""
    out: list[dict[str, Any] | None] = []
    for row in rows:
        task = row["task"]
        if task not in columns[column] or task not in columns[baseline]:
            out.append(None)
            continue
        out.append(compare(columns[column][task].by_seed, columns[baseline][task].by_seed, row["metric"]))
    return out


def write_curves(run_dir: Path) -> Path:
    """RUN_DIR/curves.png: training loss and dev score per task against the step (`mtbio report --curves`)."""
    from mtbio.reporting.plots import plot_training_curves

    metrics = RunDir(run_dir).metrics_file
    if not metrics.is_file():
        raise MtbioError(f"{run_dir}: no metrics.jsonl (not a run directory)")
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    primary = {p.stem: str(saved_task_fields(run_dir, p.stem).get("metric")) for p in RunDir(run_dir).task_files()}
    results = RunDir(run_dir).results() if RunDir(run_dir).finished else {}
    target = run_dir / "curves.png"
    plot_training_curves(records, primary, target, str(run_dir), results.get("trivial"), results.get("best_step"))
    return target


def trivial_column(paths: Sequence[Path], split: str, data_dir: Path | None,
                   metrics: Mapping[str, str] | None = None) -> dict[str, float]:
    """Task → the better of two trivial scores on `split`, the training-majority constant and the
    split's own best constant, in the task's primary metric or the one `metrics` names, for every
    task of the runs under `paths`, from the task definitions the runs saved in tasks/."""
    from mtbio.data.loading import read_split
    from mtbio.evaluation.trivial import trivial_score
    from mtbio.tasks.loading import load_run_tasks, require_data

    definitions: dict[str, Any] = {}
    for path in paths:
        for run_dir in (run.path for run in RunDir.find(path)):
            for task in load_run_tasks(run_dir).values():
                definitions.setdefault(task.name, task)
    out: dict[str, float] = {}
    for name, task in definitions.items():
        require_data(task, data_dir)
        assert data_dir is not None
        scored = read_split(task, split, data_dir)
        metric = (metrics or {}).get(name) or task.metric
        out[name] = trivial_score(task, read_split(task, "train", data_dir), scored, metric)
    return out


def build_report(paths: Sequence[Path], split: str = "dev", labels: Sequence[str] = (),
                 trivial: dict[str, float] | None = None, compare_to: str | None = None,
                 rule: Rule = Rule(), metrics: Mapping[str, str] | None = None,
                 compare_each: bool = False) -> dict[str, Any]:
    """The table as JSON-able data: columns, task rows (grouped by type), summary rows and, if asked,
    the trivial scores (task → score) and the verdict of the last column (`compare_each`: of every
    other column) against `compare_to`, judged by `rule` as one family over all of the table's tests.
    `metrics` scores the tasks it names by another saved metric than their primary one."""
    if labels and len(labels) != len(paths):
        raise MtbioError(f"--label given {len(labels)} times for {len(paths)} runs; give one per run or none")
    names = [Path(p).name or str(p) for p in paths]
    if not labels:
        labels = names if len(set(names)) == len(names) else [str(p) for p in paths]
    columns = [collect_column(Path(p), split, metrics) for p in paths]
    unknown = sorted(set(metrics or {}) - {t for column in columns for t in column})
    if unknown:
        raise MtbioError(f"--metric names {', '.join(unknown)}, which no run here scored on {split}")
    info: dict[str, TaskScores] = {}
    for column in columns:
        for task, scores in column.items():
            info.setdefault(task, scores)
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    tasks = sorted(info, key=lambda t: (order.get(info[t].category, len(order)), t))
    rows = [{"task": t, "metric": info[t].metric, "declared": info[t].declared, "category": info[t].category,
             "trivial": None if trivial is None else trivial.get(t),
             "cells": [col[t].summary() if t in col else None for col in columns]} for t in tasks]
    benchmarks = _benchmarks()
    # BLURB defines its score over each task's primary metric: a task scored otherwise leaves it (partial)
    left_out = [t for t in benchmarks["blurb"] if t in (metrics or {})]
    benchmarks["blurb"] = [t for t in benchmarks["blurb"] if t not in left_out]
    summaries = [_aggregate(col, benchmarks) for col in columns]
    for summary in summaries:
        if "blurb" in summary and left_out:
            summary["blurb"]["missing"] = list(summary["blurb"]["missing"]) + left_out
    report: dict[str, Any] = {
        "split": split,
        "columns": [{"label": label, "path": str(p), "tasks": sorted(col), "partial": len(col) < len(tasks),
                     "max_eval_examples": eval_subset(Path(p))}
                    for label, p, col in zip(labels, paths, columns)],
        "rows": rows,
        "summaries": {key: [s.get(key) for s in summaries] for key in SUMMARY_TITLES},
        "has_trivial": trivial is not None,
        "compare_to": None,
        "metric_overrides": dict(metrics or {}),
    }
    if compare_each and compare_to is None:
        raise MtbioError("--compare-each needs --compare-to LABEL (the column the others are tested against)")
    if compare_to is not None:
        allowed = list(labels) if compare_each else list(labels[:-1])
        if compare_to not in allowed:
            where = "a column" if compare_each else "a column before the last"
            raise MtbioError(f"--compare-to '{compare_to}' is not the label of {where} (labels: {', '.join(labels)})")
        baseline = list(labels).index(compare_to)
        versus = [i for i in range(len(labels)) if i != baseline] if compare_each else [len(labels) - 1]
        report["compare_to"] = {"baseline": compare_to, "last": labels[-1], "versus": [labels[i] for i in versus],
                                **rule.fields()}
        family: dict[str, dict[str, Any]] = {}
        for i in versus:
            for row, verdict in zip(rows, _verdicts(rows, columns, baseline, i)):
                row.setdefault("verdicts", {})[labels[i]] = verdict
                if verdict is not None:
                    family[f"{row['task']}: {labels[i]}"] = verdict
        report["compare_to"]["family"] = correct(family, rule)
        for row in rows:  # the last column's verdict, also under its old key
            row["verdict"] = row["verdicts"].get(labels[-1])
    return report


def _versus(report: dict[str, Any]) -> list[str]:
    """The labels of the columns tested against the baseline (none without --compare-to)."""
    versus = report.get("compare_to")
    return list(versus["versus"]) if versus else []


def _row_verdicts(row: dict[str, Any], tested: list[str]) -> list[dict[str, Any] | None]:
    """A row's verdicts in the order of `tested`."""
    return [row["verdicts"].get(label) for label in tested]


def _near_trivial(cell: dict[str, Any] | None, row: dict[str, Any]) -> bool:
    """Whether a cell's mean is within a point of its task's trivial score, or below it."""
    if cell is None or row.get("trivial") is None:
        return False
    return near_trivial(cell["mean"], row["trivial"], row["metric"])


def metric_label(metric: str, declared: str | None) -> str:
    """The metric's name, labelled post hoc when it is not the one declared before training."""
    return metric if declared in (None, metric) else f"{metric}, post hoc (declared: {declared})"


def _fmt(cell: dict[str, Any] | None, scale: float) -> str:
    if cell is None:
        return "–"
    text = f"{cell['mean'] * scale:.2f}"
    return text + (f" ± {cell['sd'] * scale:.2f}" if cell["sd"] is not None else "")


def _fmt_verdict(verdict: dict[str, Any] | None) -> str:
    if verdict is None:
        return "–"
    scale = metric_scale(verdict["metric"]) if verdict.get("metric") else 100.0
    ci = verdict.get("ci")
    interval = f" [{ci[0] * scale:+.2f}, {ci[1] * scale:+.2f}]" if ci is not None else ""
    p = f", p={verdict['p_value']:.3f}" if verdict["p_value"] is not None else ""
    if verdict.get("p_adjusted") is not None:
        p += f", adj. p={verdict['p_adjusted']:.3f}"
    label = verdict_text(verdict)
    return f"{verdict['delta'] * scale:+.2f}{interval} ({label}{p})"


def to_markdown(report: dict[str, Any]) -> str:
    """Markdown table: type | task (metric) | [trivial] | one column per run | [verdict]; scores ×100 (mse as is)."""
    labels = [c["label"] + (" §" if c.get("max_eval_examples") else "") for c in report["columns"]]
    trivial = report.get("has_trivial", False)
    versus = report.get("compare_to")
    tested = _versus(report)
    head = ["type", "task (metric)"] + (["trivial"] if trivial else []) + labels
    head += [f"Δ {label} − {versus['baseline']} (verdict)" for label in tested]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    previous, unlearned = None, False
    for row in report["rows"]:
        kind = CATEGORY_NAMES.get(row["category"], row["category"]) if row["category"] != previous else ""
        previous = row["category"]
        scale = metric_scale(row["metric"])
        near = [_near_trivial(c, row) for c in row["cells"]]
        unlearned = unlearned or any(near)
        cells = ([_fmt(None if row["trivial"] is None else {"mean": row["trivial"], "sd": None}, scale)]
                 if trivial else []) + [_fmt(c, scale) + (" ‡" if mark else "") for c, mark in zip(row["cells"], near)]
        cells += [_fmt_verdict(v) for v in _row_verdicts(row, tested)]
        lines.append(f"| {kind} | {row['task']} ({metric_label(row['metric'], row.get('declared'))}) | "
                     f"{' | '.join(cells)} |")
    marks: list[str] = []
    for key, title in SUMMARY_TITLES.items():
        entries = report["summaries"][key]
        if all(e is None for e in entries):
            continue
        cells = (["–"] if trivial else []) + [_fmt(e, 100.0) + (" †" if e is not None and e["missing"] else "")
                                               for e in entries] + ["–"] * len(tested)
        lines.append(f"| | **{title}** | {' | '.join(cells)} |")
        missing = sorted({t for e in entries if e is not None for t in e["missing"]})
        if missing:
            marks.append(f"† {title}: partial, over the tasks present; missing {', '.join(missing)}.")
    n_seeds = sorted({c["n"] for row in report["rows"] for c in row["cells"] if c is not None})
    seeds_text = "one run" if n_seeds == [1] else f"mean ± sd over {'/'.join(map(str, n_seeds))} seeds"
    metric_text = "primary metric" if not report.get("metric_overrides") else "metric as named per row"
    notes = [f"{report['split']} split, {metric_text} ×100 ({seeds_text}; sd is the sample sd)."]
    if trivial:
        notes.append("trivial: the score without learning, the better of the majority training class and the "
                     "scored split's own majority class (all `O` for NER).")
    if unlearned:
        notes.append(f"‡ less than {NEAR_TRIVIAL * 100:g} point above the trivial score: the task was not learned "
                     "there; not a result.")
    if versus:
        column = tested[0] if len(tested) == 1 else "column"
        family = versus["family"]
        threshold = ("each metric's own threshold (1 point of a 0–1 score)" if versus["min_delta"] is None
                     else f"{versus['min_delta']:g} in the metric's units")
        how = ("the t interval over seeds its verdict was read from: improves/hurts when it lies wholly beyond "
               "±min_delta, no effect when wholly inside, else undecided; its level is alpha split over the family"
               if versus.get("decision_rule", {}).get("version", "v1") == "v2" else
               "95% t interval; improves/hurts when the adjusted two-sided p < alpha and |Δ| ≥ min_delta (rule v1)")
        notes.append(f"Δ: per-seed difference {column} − {versus['baseline']}, mean [{how}]; alpha {versus['alpha']}, "
                     f"min_delta {threshold}, p two-sided, as `mtbio pairwise` judges edges. Correction: "
                     f"{family['correction']} over the family of {family['m']} tests ({'; '.join(family['tests'])}).")
    for task, metric in sorted(report.get("metric_overrides", {}).items()):
        notes.append(f"{task} is scored by {metric} here, not its primary metric (`--metric {task}={metric}`): the "
                     "plain and BLUE averages use it, the BLURB score leaves the task out.")
    for column in (c for c in report["columns"] if c.get("max_eval_examples")):
        notes.append(f"§ {column['label']}: scored on a fixed subset of at most {column['max_eval_examples']} "
                     f"{report['split']} examples per task (--max-eval-examples), not the whole split.")
    if any(c["partial"] for c in report["columns"]):
        notes.append("Some columns lack some rows; their summaries are over the tasks they have.")
    notes += marks
    notes += [f"- {c['label']}: `{c['path']}`" for c in report["columns"]]
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


def write_csv(report: dict[str, Any], path: Path) -> None:
    """One row per task and summary, per column: mean, sd, n (raw metric values, not ×100)."""
    header = ["category", "task", "metric"] + (["trivial"] if report.get("has_trivial") else [])
    for column in report["columns"]:
        header += [f"{column['label']} mean", f"{column['label']} sd", f"{column['label']} n"]
    tested = _versus(report)
    keys = ("delta", "sd", "p_value", "p_adjusted", "verdict")
    fields = ["delta", "delta sd", "p value", "adjusted p", "verdict"]
    header += fields if len(tested) == 1 else [f"{label} {f}" for label in tested for f in fields]

    def cells(entries: list[dict[str, Any] | None]) -> list[Any]:
        out: list[Any] = []
        for c in entries:
            out += ["", "", 0] if c is None else [c["mean"], "" if c["sd"] is None else c["sd"], c["n"]]
        return out

    with open_for_write(path, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in report["rows"]:
            trivial = [row["trivial"]] if report.get("has_trivial") else []
            extra = [(verdict or {}).get(key, "") for verdict in _row_verdicts(row, tested)
                     for key in keys]
            metric = metric_label(row["metric"], row.get("declared"))
            writer.writerow([row["category"], row["task"], metric, *trivial, *cells(row["cells"]), *extra])
        for key, title in SUMMARY_TITLES.items():
            writer.writerow(["", title, "", *([""] if report.get("has_trivial") else []),
                             *cells(report["summaries"][key]), *([""] * len(keys) * len(tested))])


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
