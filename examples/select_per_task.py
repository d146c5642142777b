"""The `--select per-task` study's table (issue 67) from the cells `examples/select_per_task.sh` kept: per task, the
test score of the default selection (the run's best mean dev evaluation) and of the task's own best dev evaluation,
mean ± sd over seeds, and their paired difference judged by the shared rule (v2, Holm over the four tasks). Dev is
shown, not tested: the per-task arm is the best of the same evaluations on dev by construction. Beside them, each
task's trivial score and best no-training baseline on dev (mean over seeds).

Reads committed files only (each seed's folder, or its line of RESULTS/cells.jsonl); writes RESULTS/summary.json
and prints the page's table.

    python examples/select_per_task.py [--results DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import yaml

from mtbio.fileio import write_json
from mtbio.reporting.verdicts import Rule, compare, correct, verdict_text
from mtbio.run_dir import PackedCell, RunDir, saved_runs

HERE = Path(__file__).resolve().parent
RULE = Rule(version="v2", alpha=0.05)  # declared with the study


def _kept_files(run: RunDir | PackedCell) -> dict[str, str]:
    """A seed's tasks/<t>.yml and best/<t>/results.json by their path inside it: from its folder, or from its line
    of the study's cells.jsonl once the folder is gone (`mtbio sweep pack RESULTS --remove`)."""
    if isinstance(run, PackedCell):
        return dict(run.files)
    return {p.relative_to(run.path).as_posix(): p.read_text() for pattern in ("tasks/*.yml", "best/*/results.json")
            for p in run.path.glob(pattern)}


def read_cells(results: Path) -> dict[int, dict[str, Any]]:
    """{seed: {"run": results.json, "best": {task: results.json}, "metrics": {task: metric}}} of every kept seed
    (its folder, or its line of RESULTS/cells.jsonl)."""
    cells = {}
    for run in saved_runs(results):
        seed_dir = run.path
        if seed_dir.parent != results or not seed_dir.name.startswith("seed-"):
            continue
        files = _kept_files(run)
        metrics = {Path(n).stem: yaml.safe_load(t)["metric"] for n, t in files.items()
                   if n.startswith("tasks/") and n.endswith(".yml")}
        best = {n.split("/")[1]: json.loads(t) for n, t in files.items()
                if n.startswith("best/") and n.endswith("/results.json") and n.count("/") == 2}
        cells[int(seed_dir.name[len("seed-"):])] = {"run": run.results(), "best": best, "metrics": metrics}
    return cells


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def build(results: Path) -> dict[str, Any]:
    cells = read_cells(results)
    tasks = sorted({task for cell in cells.values() for task in cell["metrics"]})
    rows, tests = [], {}
    for task in tasks:
        seeds = [s for s, c in cells.items() if task in c["best"]]
        metric = cells[seeds[0]]["metrics"][task] if seeds else ""
        row: dict[str, Any] = {"task": task, "metric": metric, "seeds": seeds}
        for split in ("dev", "test"):
            default = {s: cells[s]["run"][split][task][metric] for s in seeds if task in cells[s]["run"].get(split, {})}
            own = {s: cells[s]["best"][task][split][task][metric] for s in seeds
                   if task in cells[s]["best"][task].get(split, {})}
            row[split] = {"default": _mean_sd(list(default.values())) if default else None,
                          "per_task": _mean_sd(list(own.values())) if own else None}
            if split == "test" and default and own:
                tests[task] = compare(own, default, metric)
        baselines = [cells[s]["run"].get("baselines", {}).get(task, {}) for s in seeds]
        row["trivial"] = _mean_sd([cells[s]["run"]["trivial"][task] for s in seeds]) if seeds else None
        row["baseline"] = _mean_sd([max(b.values()) for b in baselines]) if seeds and all(baselines) else None
        row["steps"] = {"default": [cells[s]["run"]["best_step"] for s in seeds],
                        "per_task": [cells[s]["best"][task]["best_step"] for s in seeds]}
        rows.append(row)
    family = correct(tests, RULE) if tests else None
    return {**RULE.fields(), "rows": rows, "tests": tests, "family": family}


def table(summary: dict[str, Any]) -> str:
    def shown(entry: Any) -> str:
        if entry is None:
            return "–"
        mean, sd = entry
        return f"{100 * mean:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "")

    lines = ["| task (metric) | seeds | dev: trivial | dev: best no-training baseline | dev: default | dev: per-task | "
             "test: default | test: per-task | best steps (default / per-task) | test Δ per-task − default |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in summary["rows"]:
        test = summary["tests"].get(row["task"])
        interval = (f" [{100 * test['ci'][0]:+.2f}, {100 * test['ci'][1]:+.2f}]" if test and test["ci"] else "")
        delta = f"{100 * test['delta']:+.2f}{interval}, {verdict_text(test)}" if test else "–"
        steps = ", ".join(f"{a}/{b}" for a, b in zip(row["steps"]["default"], row["steps"]["per_task"]))
        lines.append(f"| {row['task']} ({row['metric']}) | {len(row['seeds'])} | {shown(row['trivial'])} | "
                     f"{shown(row['baseline'])} | {shown(row['dev']['default'])} | "
                     f"{shown(row['dev']['per_task'])} | {shown(row['test']['default'])} | "
                     f"{shown(row['test']['per_task'])} | {steps} | {delta} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "select_per_task")
    args = parser.parse_args()
    summary = build(args.results)
    write_json(args.results / "summary.json", summary)
    print(table(summary))


if __name__ == "__main__":
    main()
