"""Issue 88's development check (examples/small_data_steps.md), from benchmarks/results/bench_cell-100-*.json.

Per candidate, task and seed: the recipe's and the candidate's development-split score, optimizer steps, kept step
and wall time; then the declared primary comparison (the mean over the tasks of candidate − recipe, paired by seed,
by the shared rule) once every task has the seed, and the cost ratio over the cells both arms ran in one process
(alternating, so under the same load) and under the same cache state (every seed after a task's first: the first
cell of a task fills the baseline and feature caches the others read).

    python examples/small_data_steps.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mtbio.reporting.verdicts import Rule, compare, correct, verdict_text

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
BASE = "recipe"


def load(paths: list[Path]) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """task → arm → seed → cell (with the name of the file it came from), over the lanes' files."""
    cells: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for path in paths:
        for task, arms in json.loads(path.read_text())["cells"].items():
            for arm, runs in arms.items():
                for cell in runs:
                    cells.setdefault(task, {}).setdefault(arm, {})[cell["seed"]] = {**cell, "file": path.name}
    return cells


def candidates(cells: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> list[str]:
    """Every arm but the recipe, in the order first seen."""
    return list(dict.fromkeys(arm for arms in cells.values() for arm in arms if arm != BASE))


def render(cells: dict[str, dict[str, dict[int, dict[str, Any]]]], candidate: str = "candidate") -> str:
    """One candidate against the recipe: the table, the primary comparison and the cost line."""
    ARMS = (BASE, candidate)
    lines = [f"| task | seed | recipe: dev, steps (kept), s | {candidate}: dev, steps (kept), s | Δ (points) |",
             "|---|---:|---|---|---:|"]
    for task, arms in cells.items():
        for seed in sorted(set(arms.get(BASE, {})) | set(arms.get(candidate, {}))):
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
        family = {"Δ": compare(mean[candidate], mean[BASE])}
        correct(family, Rule())
        cell = family["Δ"]
        ci = cell.get("ci")
        lines.append(f"Primary (mean over the {len(cells)} tasks, seeds {sorted(seeds)}): Δ {100 * cell['delta']:+.2f}"
                     + (f" [{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]" if ci else "") + f", {verdict_text(cell)}")
    else:
        lines.append(f"Primary: not judged yet ({len(seeds)} seed(s) with every task in both arms)")
    warm = [(arms[BASE][s], arms[candidate][s]) for arms in cells.values()
            for s in sorted(set(arms.get(BASE, {})) & set(arms.get(candidate, {})))[1:]
            if arms[BASE][s]["file"] == arms[candidate][s]["file"]]
    if warm:
        ratio = sum(r["wall_seconds"] for r, _ in warm) / sum(c["wall_seconds"] for _, c in warm)
        lines.append(f"Cost over the {len(warm)} seed pair(s) after each task's first: recipe "
                     f"{sum(r['wall_seconds'] for r, _ in warm) / len(warm):.0f} s, candidate "
                     f"{sum(c['wall_seconds'] for _, c in warm) / len(warm):.0f} s a cell: ×{ratio:.2f} cheaper")
    else:
        lines.append("Cost: no pair of cells ran in one process (see the back-to-back pair's file)")
    return "\n".join(lines)


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or sorted(RESULTS.glob("bench_cell-100-*.json"))
    cells = load(paths)
    print("\n\n".join(f"### {name}\n\n" + render(cells, name) for name in candidates(cells)))


if __name__ == "__main__":
    main()
