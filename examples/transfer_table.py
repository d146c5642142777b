"""The transfer study's table as markdown, from a transfer sweep's transfer.json (examples/transfer_biomedical.md).

One row per target and training size: the trivial score, each start's no-training baselines (the best of the
cosine and probe baselines, fitted on the same subset), the plain encoder's mean ± sd, and per refined start its
mean ± sd with Δ, its interval (at the level the file's rule gave it), Holm-adjusted p and verdict (as every page
writes it: "undecided" where the interval settles neither way). Scores ×100. A start whose mean does not clear its
trivial score or its own no-training baseline is marked †. Below it, each start's mean over the table's points
and every pair of starts compared on it (paired over seeds, Holm over the pairs).

    python examples/transfer_table.py [examples/transfer_biomedical]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mtbio.reporting.verdicts import verdict_text

HERE = Path(__file__).resolve().parent


def best_baseline(found: dict[str, float | None]) -> str:
    """The best of a point's no-training baselines (name → score) ×100 with its name, or "–"."""
    values = {name: value for name, value in found.items() if value is not None}
    if not values:
        return "–"
    name = max(values, key=lambda k: values[k])
    return f"{100 * values[name]:.1f} ({name})"


def mean_sd(scores: dict[str, Any]) -> str:
    """A mean ± sd ×100 (the mean alone where there is no sd)."""
    sd = f" ± {100 * scores['sd']:.1f}" if scores.get("sd") is not None else ""
    return f"{100 * scores['mean']:.1f}{sd}"


def _cell(scores: dict[str, Any], marked: bool) -> str:
    return mean_sd(scores) + (" †" if marked else "")


def _levels(cells: list[dict[str, Any]]) -> str:
    """The confidence levels of `cells`' intervals, as a header names them: "95%" or a range."""
    found = sorted({round(100 * cell.get("ci_level", 0.95), 1) for cell in cells if cell.get("ci")})
    if not found:
        return "95%"
    return f"{found[0]:g}%" if found[0] == found[-1] else f"{found[0]:g}–{found[-1]:g}%"


def table(result: dict[str, Any]) -> str:
    """The markdown table of transfer.json's content."""
    starts = list(result["refinement_sets"])
    level = _levels([cell for row in result["targets"] for point in row["points"] for cell in point["from"].values()])
    head = ["target", "n", "trivial", "no training: plain", *[f"no training: {s}" for s in starts], "plain",
            *[f"from {s}: score, Δ [{level} CI], p_adj, verdict" for s in starts]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["targets"]:
        trivial = "–" if row["trivial"] is None else f"{100 * row['trivial']:.1f}"
        for point in row["points"]:
            cells = [row["target"], str(point["examples"]), trivial,
                     best_baseline(point["no_training"].get("plain", {})),
                     *[best_baseline(point["no_training"].get(s, {})) for s in starts],
                     _cell(point["plain"], "plain" in point["below"])]
            for start in starts:
                cell = point["from"].get(start)
                if cell is None:
                    cells.append("–")
                    continue
                ci = cell["ci"]
                interval = f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else ""
                p = "–" if cell["p_adjusted"] is None else f"{cell['p_adjusted']:.3f}"
                cells.append(f"{_cell(cell['score'], start in point['below'])}, {100 * cell['delta']:+.1f}{interval}, "
                             f"{p}, {verdict_text(cell)}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def average(result: dict[str, Any]) -> str:
    """Each start's mean over the points (mean ± sd over seeds) and every pair of starts compared on it."""
    found = result["average"]
    lines = ["| start | mean over points |", "|---|---|"]
    lines += [f"| {start} | {_cell(scores, False)} |" for start, scores in found["starts"].items()]
    lines += ["", f"| comparison | Δ [{_levels(list(found['pairs'].values()))} CI] | p_adj | verdict |", "|---|---|---|---|"]
    for name, cell in found["pairs"].items():
        ci = cell["ci"]
        interval = f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else ""
        p = "–" if cell["p_adjusted"] is None else f"{cell['p_adjusted']:.3f}"
        lines.append(f"| {name} | {100 * cell['delta']:+.1f}{interval} | {p} | {verdict_text(cell)} |")
    return "\n".join(lines)


def main() -> None:
    sweep = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "transfer_biomedical"
    result = json.loads((sweep / "transfer.json").read_text())
    print(f"{len(result['seeds'])} seeds, dev, {result['family']['correction']} over {result['family']['m']} tests\n")
    print(table(result))
    print(f"\nMean over the {', '.join(map(str, result['average']['points_per_seed']))} points per seed, "
          f"{result['family']['correction']} over the {result['average']['family']['m']} comparisons:\n")
    print(average(result))


if __name__ == "__main__":
    main()
