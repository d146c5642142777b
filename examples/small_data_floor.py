"""The small-data floor's table (issue 63) from the cells `examples/small_data_floor.sh` kept: per task and size,
each arm's dev score (mean ± sd over seeds), the trivial score and the no-training baselines of the run's own data,
and two families of tests under the shared rule (`mtbio.reporting.verdicts`, Holm over each family):

- floor: the recipe's per-seed scores against the best no-training baseline of the same seed and data (a paired
  test over seeds; the point holds unless the recipe is judged "hurts", i.e. lower by a point or more), on every
  task × size whose best baseline is above its trivial score;
- recipe − today: the recipe against today's defaults, paired over seeds;
- issue 88 (rule v2, declared on the page before its cells): on the 8 points that test the floor and issue 88's
  holdout, the recipe-88 arm against its floor (the best of the trivial score and the baselines) and against the
  recipe arm.

Reads committed files only; writes RESULTS/summary.json and prints the page's table.

    python examples/small_data_floor.py [--results DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import yaml

from mtbio.evaluation.metrics import metric_sign
from mtbio.fileio import write_json
from mtbio.model.floor import best_baseline, task_floor
from mtbio.reporting.verdicts import MIN_SEEDS, Rule, compare, correct, harms, state_text, verdict_text
from mtbio.run_dir import PackedCell, RunDir, saved_runs

HERE = Path(__file__).resolve().parent
ALPHA, MIN_DELTA = 0.05, 0.01
RULE = Rule(version="v1", alpha=ALPHA, min_delta=MIN_DELTA)  # the rule declared with the study
RULE88 = Rule(version="v2")  # issue 88's judgement, declared on the page in session 57
POINTS88 = [("ade", "100"), ("chemprot", "100"), ("chemprot", "1000"), ("chemprot", "2000"), ("ddi", "100"),
            ("ddi", "1000"), ("ddi", "2000"), ("hoc", "100")]  # the points that tested the floor
HOLDOUT88 = [(task, size) for size in ("100", "1000") for task in ("jnlpba", "nli4ct", "bioasq")]


def read_cells(results: Path) -> dict[tuple[str, str, str], dict[int, dict[str, Any]]]:
    """{(arm, task, size): {seed: results.json}} of every kept cell (ARM/TASK/n-SIZE/seed-S: its folder, or its line
    of the study's cells.jsonl)."""
    cells: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    for run in saved_runs(results):
        parts = run.path.relative_to(results).parts
        if len(parts) != 4 or not parts[2].startswith("n-") or not parts[3].startswith("seed-"):
            continue
        arm, task, size, seed = parts[0], parts[1], parts[2][2:], int(parts[3][len("seed-"):])
        result = run.results()
        result["metric"] = yaml.safe_load(run.read_text(f"tasks/{task}.yml"))["metric"]  # as declared
        _keep_start(result, task, run)
        cells.setdefault((arm, task, size), {})[seed] = result
    return cells


def _keep_start(result: dict[str, Any], task: str, run: RunDir | PackedCell) -> None:
    """The amended recipe's choice: the LP-FT start's dev scores where they are better than the kept weights' (a cell
    run before the amendment has its start's scores in start.json; a later one selected among them already)."""
    start = (result.get("start_scores") or {}).get(task)
    if start is None:
        try:
            start = json.loads(run.read_text("start.json"))["start_scores"].get(task)
        except FileNotFoundError:
            pass
    metric, sign = result["metric"], metric_sign(result["metric"])
    result["start"] = start
    if start is not None and sign * start[metric] > sign * result["dev"][task][metric]:
        result["dev"][task] = start


def _score(result: dict[str, Any], task: str) -> float:
    return float(result["dev"][task][result_metric(result, task)])


def result_metric(result: dict[str, Any], task: str) -> str:
    """The task's declared metric (its definition in the cell's tasks/)."""
    return str(result["metric"])


def _best_baseline(result: dict[str, Any], task: str, metric: str) -> tuple[str, float] | None:
    return best_baseline((result.get("baselines") or {}).get(task) or {}, metric)


def _start_score(result: dict[str, Any]) -> float | None:
    """The dev score of the run's LP-FT start (None: the run had none)."""
    return None if result.get("start") is None else float(result["start"][result["metric"]])


def floor_tests_of(summary: dict[str, Any]) -> dict[str, Any]:
    """Which floor points test the floor. The recipe keeps its LP-FT start where fine-tuning does not beat it on dev,
    so a point whose start equals or beats the best baseline on every seed cannot be judged lower; the others test
    it. Recipe results equal on every seed to another point's at the same size (the `-bi` rows, the same model, data
    and seeds) are counted once."""
    rows = {f"{row['task']} n={row['size']}": row for row in summary["rows"]}
    testing, seen, repeats = [], {}, {}
    for name in summary["floor"]:
        recipe = rows[name]["arms"]["recipe"]
        starts = recipe.get("start_per_seed") or {}
        best = rows[name]["best_per_seed"]
        sign = metric_sign(rows[name]["metric"])
        if not starts or any(sign * (starts[seed] - best[seed]) < 0 for seed in best):
            testing.append(name)
        key = (rows[name]["size"], tuple(sorted(recipe["per_seed"].items())))
        if key in seen:
            repeats[name] = seen[key]
        else:
            seen[key] = name
    return {"points": len(summary["floor"]), "testing": testing, "repeats": repeats,
            "distinct": len(summary["floor"]) - len(repeats)}


def build(results: Path) -> dict[str, Any]:
    cells = read_cells(results)
    points = sorted({(task, size) for _, task, size in cells}, key=lambda p: (int(p[1]), p[0]))
    rows: list[dict[str, Any]] = []
    floor_tests: dict[str, Any] = {}
    today_tests: dict[str, Any] = {}  # the same floor test on today's scores: described, not a family of the study
    recipe_tests: dict[str, Any] = {}
    for task, size in points:
        arms = {arm: runs for (arm, t, s), runs in cells.items() if (t, s) == (task, size)}
        any_run = next(iter(next(iter(arms.values())).values()))
        metric = result_metric(any_run, task)
        sign = metric_sign(metric)
        row: dict[str, Any] = {"task": task, "size": size, "metric": metric, "arms": {}}  # size: the cap asked
        for arm, runs in arms.items():
            scores = {seed: _score(r, task) for seed, r in runs.items()}
            row["arms"][arm] = {"mean": statistics.fmean(scores.values()),
                                "sd": statistics.stdev(scores.values()) if len(scores) > 1 else None,
                                "per_seed": scores, "steps": statistics.fmean(r["steps"] for r in runs.values())}
            starts = {seed: _start_score(r) for seed, r in runs.items()}
            if all(v is not None for v in starts.values()):
                row["arms"][arm]["start_per_seed"] = starts
        row["trivial"] = statistics.fmean(float(r["trivial"][task]) for runs in arms.values() for r in runs.values())
        names = sorted({name for runs in arms.values() for r in runs.values()
                        for name in ((r.get("baselines") or {}).get(task) or {})})
        row["baselines"] = {name: statistics.fmean(float(r["baselines"][task][name]) for runs in arms.values()
                                                   for r in runs.values() if name in ((r.get("baselines") or {}).get(task) or {}))
                            for name in names}
        name = f"{task} n={size}"
        for arm_name, tests in (("recipe", floor_tests), ("today", today_tests)):
            runs = arms.get(arm_name, {})
            floors = {seed: _best_baseline(r, task, metric) for seed, r in runs.items()}
            if runs and all(floors.values()):
                best = {seed: f[1] for seed, f in floors.items() if f}
                row.setdefault("best_baseline", statistics.fmean(best.values()))
                row.setdefault("best_per_seed", best)
                # a floor above the trivial score, both means over this arm's runs: the row's mean over both arms'
                # runs can round a value one ulp away from the same value's mean over one arm
                trivial = statistics.fmean(float(r["trivial"][task]) for r in runs.values())
                if sign * (statistics.fmean(best.values()) - trivial) > 0:
                    tests[name] = compare({s: _score(r, task) for s, r in runs.items()}, best, metric)
        recipe = arms.get("recipe", {})
        if recipe and "today" in arms:
            recipe_tests[name] = compare({s: _score(r, task) for s, r in recipe.items()},
                                         {s: _score(r, task) for s, r in arms["today"].items()}, metric)
        rows.append(row)
    if today_tests:
        correct(today_tests, RULE)
    families = {"floor": correct(floor_tests, RULE) if floor_tests else None,
                "recipe_vs_today": correct(recipe_tests, RULE) if recipe_tests else None}
    def holds(tests: dict[str, Any]) -> dict[str, int]:
        """Points judged (all their seeds in), how many hold, and how many still wait for seeds."""
        judged = [cell for cell in tests.values() if cell["n_seeds"] >= MIN_SEEDS]
        return {"points": len(judged), "held": sum(not harms(cell) for cell in judged),
                "waiting": len(tests) - len(judged)}

    summary = {**RULE.fields(), "rows": rows, "families": families,
               "floor": floor_tests, "recipe_vs_today": recipe_tests, "floor_today": today_tests,
               "floor_holds": holds(floor_tests), "floor_holds_today": holds(today_tests)}
    return {**summary, "floor_tested": floor_tests_of(summary), "issue_88": issue_88(cells)}


def issue_88(cells: dict[tuple[str, str, str], dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Issue 88's two families over its 14 points: recipe-88 against its floor (per seed, the best of the trivial
    score and the no-training baselines) and recipe-88 − recipe, paired by seed; and the points whose recipe-88
    LP-FT start equals or beats the floor on every seed (held by construction)."""
    vs_floor: dict[str, Any] = {}
    vs_recipe: dict[str, Any] = {}
    rows = []
    for task, size in POINTS88 + HOLDOUT88:
        new, old = cells.get(("recipe-88", task, size), {}), cells.get(("recipe", task, size), {})
        if not new:
            continue
        metric = result_metric(next(iter(new.values())), task)
        sign = metric_sign(metric)
        floors = {seed: task_floor(float(r["trivial"][task]), (r.get("baselines") or {}).get(task) or {},
                                   metric)["score"] for seed, r in new.items()}
        scores = {seed: _score(r, task) for seed, r in new.items()}
        before = {seed: _score(r, task) for seed, r in old.items()}
        starts = {seed: _start_score(r) for seed, r in new.items()}
        name = f"{task} n={size}"
        vs_floor[name] = compare(scores, floors, metric)
        if before:
            vs_recipe[name] = compare(scores, before, metric)
        rows.append({"point": name, "holdout": (task, size) in HOLDOUT88, "metric": metric,
                     "floor": statistics.fmean(floors.values()), "new": scores, "old": before,
                     "steps": statistics.fmean(r["steps"] for r in new.values()),
                     "by_construction": all(v is not None and sign * (v - floors[s]) >= 0 for s, v in starts.items())})
    return {**RULE88.fields(), "rows": rows, "vs_floor": vs_floor, "vs_recipe": vs_recipe,
            "families": {"vs_floor": correct(vs_floor, RULE88) if vs_floor else None,
                         "vs_recipe": correct(vs_recipe, RULE88) if vs_recipe else None}}


def table_88(judged: dict[str, Any]) -> str:
    """Issue 88's table: each point's floor, both arms and the two verdicts."""
    def mean_sd(scores: dict[int, float], also: str = "") -> str:
        if not scores:
            return "–"
        values = list(scores.values())
        sd = f" ± {100 * statistics.stdev(values):.1f}" if len(values) > 1 else ""
        return f"{100 * statistics.fmean(values):.1f}{sd} ({len(values)}{also})"

    lines = ["| point | metric | floor | recipe (seeds) | recipe-88 (seeds, steps) | recipe-88 vs floor | "
             "recipe-88 − recipe | start holds the floor |", "|---|---|---:|---:|---:|---|---|---|"]
    for row in judged["rows"]:
        cells = []
        for family in ("vs_floor", "vs_recipe"):
            cell = judged[family].get(row["point"])
            cells.append("–" if cell is None else f"{100 * cell['delta']:+.1f}, {state_text(cell, 100)}")
        steps = f", {row['steps']:.0f} steps"
        lines.append(f"| {row['point']}{' (holdout)' if row['holdout'] else ''} | {row['metric']} "
                     f"| {100 * row['floor']:.1f} | {mean_sd(row['old'])} | {mean_sd(row['new'], steps)} "
                     f"| {cells[0]} | {cells[1]} | "
                     f"{'yes' if row['by_construction'] else 'no'} |")
    return "\n".join(lines)


def table(summary: dict[str, Any]) -> str:
    def arm(row: dict[str, Any], name: str) -> str:
        entry = row["arms"].get(name)
        if entry is None:
            return "–"
        sd = f" ± {100 * entry['sd']:.1f}" if entry["sd"] is not None else ""
        return f"{100 * entry['mean']:.1f}{sd} ({entry['steps']:.0f} steps)"

    def over_start(row: dict[str, Any]) -> str:
        entry = row["arms"].get("recipe") or {}
        starts = entry.get("start_per_seed")
        if not starts:
            return "–"
        gains = [entry["per_seed"][seed] - start for seed, start in starts.items()]
        return f"{100 * statistics.fmean(gains):+.1f} (start {100 * statistics.fmean(starts.values()):.1f})"

    lines = ["| task | n (cap) | metric | trivial | no-training baselines | today | recipe | recipe vs best baseline | "
             "recipe − today | fine-tuning over its start |", "|---|---:|---|---:|---|---:|---:|---|---|---:|"]
    for row in summary["rows"]:
        name = f"{row['task']} n={row['size']}"
        base = ", ".join(f"{k} {100 * v:.1f}" for k, v in row["baselines"].items()) or "–"
        cells = []
        for family in ("floor", "recipe_vs_today"):
            cell = summary[family].get(name)
            cells.append("–" if cell is None else f"{100 * cell['delta']:+.1f}, {verdict_text(cell)}")
        lines.append(f"| {row['task']} | {row['size']} | {row['metric']} | {100 * row['trivial']:.1f} | {base} "
                     f"| {arm(row, 'today')} | {arm(row, 'recipe')} | {cells[0]} | {cells[1]} | {over_start(row)} |")
    held, today, tested = summary["floor_holds"], summary["floor_holds_today"], summary["floor_tested"]
    lines += ["", f"Floor held (the recipe not judged lower than its best baseline): {held['held']} of {held['points']} "
              f"points with a baseline above trivial and {MIN_SEEDS} seeds ({held['waiting']} waiting for seeds); under "
              f"today's defaults (described): {today['held']} of {today['points']} ({today['waiting']} waiting).",
              "", f"Points that test the floor (the recipe's LP-FT start, which it keeps where fine-tuning does not beat "
              f"it on dev, below the best baseline on a seed): {len(tested['testing'])} of {tested['points']} "
              f"({', '.join(tested['testing']) or 'none'}); on the other "
              f"{tested['points'] - len(tested['testing'])} the start equals or beats the best baseline on every seed, "
              f"so the recipe cannot fall below it. Distinct recipe results among the {tested['points']}: "
              f"{tested['distinct']}" + (" (" + "; ".join(f"{name} is {first}'s scores on every seed"
                                                          for name, first in tested["repeats"].items()) + ")"
                                          if tested["repeats"] else "") + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "small_data_floor")
    args = parser.parse_args()
    summary = build(args.results)
    write_json(args.results / "summary.json", summary)
    print(table(summary))
    if summary["issue_88"]["rows"]:
        print("\nIssue 88's judgement (rule v2, Holm over each column's points):\n")
        print(table_88(summary["issue_88"]))


if __name__ == "__main__":
    main()
