"""Issue 88's development check (examples/small_data_steps.md), from benchmarks/results/bench_cell-100-lane*.json.

Per task and seed: each arm's development-split score, optimizer steps, kept step and wall time; then the declared
primary comparison (the mean over the tasks of candidate − recipe, paired by seed, by the shared rule) once every task
has the seed, and the cost ratio over the cells both arms ran under the same cache state (every seed after a task's
first: the first cell of a task fills the baseline and feature caches the others read).

    python examples/small_data_steps.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mtbio.reporting.verdicts import Rule, compare, correct, verdict_text

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
ARMS = ("recipe", "candidate")


def load(paths: list[Path]) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """task → arm → seed → cell, over the lanes' files."""
    cells: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for path in paths:
        for task, arms in json.loads(path.read_text())["cells"].items():
            for arm, runs in arms.items():
                for cell in runs:
                    cells.setdefault(task, {}).setdefault(arm, {})[cell["seed"]] = cell
    return cells


def render(cells: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> str:
    lines = ["| task | seed | recipe: dev, steps (kept), s | candidate: dev, steps (kept), s | Δ (points) |",
             "|---|---:|---|---|---:|"]
    for task, arms in cells.items():
        for seed in sorted(set(arms.get("recipe", {})) | set(arms.get("candidate", {}))):
            row = [task.removesuffix("-devsplit"), str(seed)]
            for arm in ARMS:
                c = arms.get(arm, {}).get(seed)
                row.append("–" if c is None else f"{100 * c['dev']:.1f}, {c['steps']} ({c['best_step']}), "
                                                 f"{c['wall_seconds']:.0f}")
            both = [arms.get(arm, {}).get(seed) for arm in ARMS]
            row.append("–" if None in both else f"{100 * (both[1]['dev'] - both[0]['dev']):+.1f}")
            lines.append("| " + " | ".join(row) + " |")
    seeds = set.intersection(*(set(arms.get(a, {})) for arms in cells.values() for a in ARMS)) if cells else set()
    lines.append("")
    if len(seeds) >= 2:
        mean = {arm: {s: sum(cells[t][arm][s]["dev"] for t in cells) / len(cells) for s in seeds} for arm in ARMS}
        family = {"candidate − recipe": compare(mean["candidate"], mean["recipe"])}
        correct(family, Rule())
        cell = family["candidate − recipe"]
        ci = cell.get("ci")
        lines.append(f"Primary (mean over the {len(cells)} tasks, seeds {sorted(seeds)}): Δ {100 * cell['delta']:+.2f}"
                     + (f" [{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]" if ci else "") + f", {verdict_text(cell)}")
    else:
        lines.append(f"Primary: not judged yet ({len(seeds)} seed(s) with every task in both arms)")
    warm = [(arms["recipe"][s], arms["candidate"][s]) for arms in cells.values()
            for s in sorted(set(arms.get("recipe", {})) & set(arms.get("candidate", {})))[1:]]
    if warm:
        ratio = sum(r["wall_seconds"] for r, _ in warm) / sum(c["wall_seconds"] for _, c in warm)
        lines.append(f"Cost over the {len(warm)} seed pair(s) after each task's first: recipe "
                     f"{sum(r['wall_seconds'] for r, _ in warm) / len(warm):.0f} s, candidate "
                     f"{sum(c['wall_seconds'] for _, c in warm) / len(warm):.0f} s a cell: ×{ratio:.2f} cheaper")
    return "\n".join(lines)


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or sorted(RESULTS.glob("bench_cell-100-lane*.json"))
    print(render(load(paths)))


if __name__ == "__main__":
    main()
