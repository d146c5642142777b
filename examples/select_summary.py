"""Tabulate a `mtbio select` study (examples/select.sh): one section per target, from the committed files.

    python examples/select_summary.py examples/select_biomedical [--data-dir ../shared/data]

Per target: the predictor's ranking, the verified pairs (dev Δ, the interval over seeds its verdict was read from,
Holm-adjusted p, verdict), the three arms on test (mean ± sd over seeds; dev beside it) with each arm's optimizer steps, the
comparisons on test, and the cost of `select` against the full pairwise sweep it replaces (the target alone and
with every candidate, same seeds), in cell wall seconds. With a data directory, the target's trivial score on
test (the better of its capped training set's majority and the best constant on test) is added, and the target's
no-training baselines on dev where its alone cells kept them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from mtbio.experiments.select import group_cells
from mtbio.reporting.verdicts import verdict_text
from mtbio.run_dir import saved_cell, saved_runs


def _results(cells_dir: Path) -> list[dict[str, Any]]:
    """The results of the finished `seed-*` cells in `cells_dir` (their directories, or the study's cells.jsonl)."""
    return [run.results() for run in saved_runs(cells_dir)
            if run.path.parent == cells_dir and run.path.name.startswith("seed-")]


def _wall(cells_dir: Path) -> float:
    return sum(r["wall_seconds"] for r in _results(cells_dir))


def _steps(cells_dir: Path) -> int:
    return int(statistics.mean(r["steps"] for r in _results(cells_dir)))


def dev_baselines(directory: Path, target: str) -> str:
    """The target's no-training baselines on dev from its alone cells (mean over seeds), '' where none were kept."""
    kept = [r.get("baselines", {}).get(target) for r in _results(directory / "pairwise" / "baselines" / target)]
    if not kept or not all(kept):
        return ""
    means = {name: statistics.mean(b[name] for b in kept) for name in kept[0]}
    return "; no-training baselines on dev: " + ", ".join(f"{name} {value:.3f}" for name, value in means.items())


def test_trivial(target: str, data_dir: Path, train_examples: int | None) -> float:
    """The target's trivial score on test (mtbio.evaluation.trivial), fitted on the capped training set."""
    from mtbio.data.loading import read_split
    from mtbio.evaluation.trivial import trivial_score
    from mtbio.tasks.loading import load_catalog

    task = load_catalog([]).get(target)
    return trivial_score(task, read_split(task, "train", data_dir, train_examples), read_split(task, "test", data_dir))


def _target_cap(directory: Path, result: dict[str, Any]) -> int | None:
    """The target's training cap in the study (--task-examples TARGET=N, else --max-train-examples)."""
    from mtbio.experiments.common import train_examples_of
    from mtbio.training.config import RunConfig

    alone = saved_cell(directory / "pairwise" / "baselines" / result["target"] / f"seed-{result['seeds'][0]}")
    assert alone is not None, f"{directory}: the target's first alone cell is missing"
    recorded = alone.config()
    return train_examples_of(RunConfig(task_examples=recorded.get("task_examples") or [],
                                       max_train_examples=recorded.get("max_train_examples")), result["target"])


def cost(directory: Path, result: dict[str, Any]) -> dict[str, float]:
    """Cell wall seconds: select's (prediction, pairs and alone, groups) and the full sweep's (alone + every pair:
    the measured pairs' mean time for the pairs not trained)."""
    pairwise = directory / "pairwise"
    alone = _wall(pairwise / "baselines" / result["target"])
    pairs = {name: _wall(pairwise / "pairs" / name)
             for name in sorted({run.path.parent.name for run in saved_runs(pairwise / "pairs")})}
    groups = sum(run.results()["wall_seconds"] for run in saved_runs(directory / "groups"))
    trained_here = saved_cell(directory / result["prediction_dir"] / "seed-42") is not None  # else read back: not paid
    prediction = result["prediction_cost"]["wall_seconds"] if trained_here else 0.0
    return {"prediction": prediction, "pairs": alone + sum(pairs.values()), "groups": groups,
            "sweep": alone + statistics.mean(pairs.values()) * len(result["candidates"])}


def section(directory: Path, data_dir: Path | None) -> str:
    result = json.loads((directory / "select.json").read_text())
    target, metric = result["target"], result["outcome"]["metric"]
    lines = [f"### {target} ({metric})", ""]
    lines.append("Predicted order (lookahead affinity of each candidate on the target): "
                 + ", ".join(f"{r['task']} {r['score']:+.2g}" for r in result["ranking"]) + ".")
    lines += ["", "| verified pair | dev Δ | interval (rule's level) | adjusted p | verdict |", "|---|---:|---|---:|---|"]
    for partner, pair in (result["pairs"] or {}).items():
        lo, hi = pair["ci"]
        lines.append(f"| {target} + {partner} | {pair['delta']:+.3f} | [{lo:+.3f}, {hi:+.3f}] | "
                     f"{pair['p_adjusted']:.3g} | {verdict_text(pair)} |")
    selected = ", ".join(result["selected"]) or "none (the target alone)"
    outcome, dev = result["outcome"], result["outcome_dev"]
    steps = {"alone": _steps(directory / "pairwise" / "baselines" / target)}
    for name, members in (("selected", result["selected"]), ("all", result["candidates"])):
        group = group_cells(directory / "groups", target, members, result["seeds"][0], 0.0)[-1].run_dir.parent
        steps[name] = _steps(group) if members and _results(group) else steps["alone"]
    trivial = f"; trivial score on test {test_trivial(target, data_dir, _target_cap(directory, result)):.3f}" \
        if data_dir else ""
    lines += ["", f"Selected: {selected}{trivial}{dev_baselines(directory, target)}.", "",
              "| arm | test | dev | steps |", "|---|---|---|---:|"]
    for arm in ("alone", "selected", "all"):
        t, d = outcome["scores"][arm], dev["scores"][arm]
        lines.append(f"| {arm} | {t['mean']:.3f} ± {t['sd']:.3f} | {d['mean']:.3f} ± {d['sd']:.3f} | {steps[arm]} |")
    lines += ["", "| on test | Δ | interval (rule's level) | adjusted p | verdict |", "|---|---:|---|---:|---|"]
    for name, c in outcome["comparisons"].items():
        lo, hi = c["ci"]
        lines.append(f"| {name} | {c['delta']:+.3f} | [{lo:+.3f}, {hi:+.3f}] | {c['p_adjusted']:.3g} | "
                     f"{verdict_text(c)} |")
    spent = cost(directory, result)
    lines += ["", f"Cost in cell seconds: prediction {spent['prediction']:.0f}, alone + verified pairs "
                  f"{spent['pairs']:.0f}, groups {spent['groups']:.0f}; the full pairwise sweep it replaces "
                  f"≈ {spent['sweep']:.0f}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--data-dir", type=Path, default=os.environ.get("MTBIO_DATA_DIR") or None)
    args = parser.parse_args()
    for directory in sorted(p.parent for p in args.study.glob("*/select.json")):
        print(section(directory, args.data_dir))


if __name__ == "__main__":
    main()
