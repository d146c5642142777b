"""The per-edge table of a pairwise page, from the sweep's relations.json (points ×100):

    python examples/edge_table.py examples/pairwise_biomedical/relations.json

One row per edge: its seeds, per-seed Δ, mean Δ with the t interval its state was read from (at the level the
rule gave it), the two-sided p against 0, the adjusted p of the rule (v2: of "beyond ±min_delta", over the graph's
family), and the verdict as `mtbio report SWEEP` prints it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mtbio.reporting.verdicts import verdict_text


def _points(x: float) -> str:
    return f"{100 * x:+.2f}".replace("-", "−")


def edge_table(relations: dict) -> str:
    family = relations.get("family") or {}
    version = (relations.get("decision_rule") or {}).get("version", "v1")
    what = "p beyond ±min_delta" if version == "v2" else "p"
    adjusted = f"{what}, {family.get('correction', 'none').capitalize()} over {family.get('m', len(relations['edges']))}"
    rows = [f"| edge (source → target) | seeds | Δ per seed | mean [interval, level] | p (two-sided) | {adjusted} | "
            f"verdict ({version}) |", "|---|---:|---|---:|---:|---:|---|"]
    for e in relations["edges"]:
        seeds = sorted(e["per_seed"], key=int)
        per_seed = ", ".join(_points(e["per_seed"][s]["delta"]) for s in seeds)
        level = f", {100 * e.get('ci_level', 0.95):.3g}%"
        ci = f" [{_points(e['ci'][0])}, {_points(e['ci'][1])}{level}]" if e.get("ci") else ""
        p = "–" if e["p_value"] is None else f"{e['p_value']:.3f}"
        p_adj = "–" if e.get("p_adjusted") is None else f"{e['p_adjusted']:.3f}"
        rows.append(f"| {e['source']} → {e['target']} | {len(seeds)} ({seeds[0]}–{seeds[-1]}) | {per_seed} | "
                    f"{_points(e['delta'])}{ci} | {p} | {p_adj} | {verdict_text(e)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(edge_table(json.loads(Path(sys.argv[1]).read_text())))
