"""Tabulate a recipe search (examples/recipe_search.sh): dev score per task, learning rate and epoch.

    python examples/recipe_summary.py runs/recipe-search > examples/recipe_search.md

Reads each run's metrics.jsonl (the dev evaluation after every epoch) and marks, per task, the
learning rate and epoch with the best dev score.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def dev_curves(search_dir: Path) -> dict[str, dict[str, list[float]]]:
    """task → lr → dev primary score after each epoch."""
    curves: dict[str, dict[str, list[float]]] = {}
    for metrics in sorted(search_dir.glob("*/lr-*/*/metrics.jsonl")):
        task, lr = metrics.parent.name, metrics.parent.parent.name.removeprefix("lr-")
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        curves.setdefault(task, {})[lr] = [r["selection"] for r in rows if r.get("split") == "dev"]
    return curves


def to_markdown(curves: dict[str, dict[str, list[float]]]) -> str:
    epochs = max((len(v) for lrs in curves.values() for v in lrs.values()), default=0)
    lines = ["| task | lr | " + " | ".join(f"dev after epoch {e + 1}" for e in range(epochs)) + " |",
             "|---|---|" + "---:|" * epochs]
    for task, lrs in curves.items():
        best = max(((lr, e) for lr, v in lrs.items() for e in range(len(v))), key=lambda k: lrs[k[0]][k[1]])
        for lr in sorted(lrs, key=float):
            cells = [f"**{x * 100:.2f}**" if (lr, e) == best else f"{x * 100:.2f}" for e, x in enumerate(lrs[lr])]
            lines.append(f"| {task} | {lr} | " + " | ".join(cells + [""] * (epochs - len(cells))) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(to_markdown(dev_curves(Path(sys.argv[1]))), end="")
