"""Tabulate a recipe search (examples/recipe_search.sh): dev score per task, learning rate and epoch.

    python examples/recipe_summary.py runs/recipe-search > examples/recipe_search.md

Reads each run's metrics.jsonl (the dev evaluation after every epoch; from its directory, or from its line of
SEARCH_DIR/cells.jsonl) and marks, per task, the learning rate and epoch with the best dev score.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _metrics(search_dir: Path) -> dict[Path, str]:
    """Each run's metrics.jsonl by its run directory (<task>/lr-<lr>/<task>/): from the directory, or from its line of
    the search's cells.jsonl once the directory is gone (`mtbio sweep pack SEARCH_DIR --remove`)."""
    found = {path.parent: path.read_text() for path in search_dir.glob("*/lr-*/*/metrics.jsonl")}
    packed = search_dir / "cells.jsonl"  # one JSON line per cell: {"cell": <its directory>, "files": {...}, ...}
    for cell in map(json.loads, packed.read_text().splitlines() if packed.is_file() else []):
        run = search_dir / cell["cell"]
        if not run.exists() and "metrics.jsonl" in cell["files"] and Path(cell["cell"]).match("*/lr-*/*"):
            found.setdefault(run, cell["files"]["metrics.jsonl"])
    return found


def dev_curves(search_dir: Path) -> dict[str, dict[str, list[float]]]:
    """task → lr → dev primary score after each epoch."""
    curves: dict[str, dict[str, list[float]]] = {}
    for run, text in sorted(_metrics(search_dir).items()):
        task, lr = run.name, run.parent.name.removeprefix("lr-")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
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
