"""The decision rule's graph-wide error under adaptive seeds (issue 63 claim (c); issue 64): a graph of 12 edges with
no true effect, each edge's per-seed Δ drawn with the spreads seen in the committed graphs (1, 2, 5 and 15 points),
judged by the shared rule with Holm over the graph after every added seed (`--seeds auto`: start 3, up to 8) or
once at a fixed 8 seeds. Prints and writes the share of edges ending falsely green or red (per edge) and the share
of graphs ending with at least one (family-wise), with the Monte Carlo standard error of each. Nothing is trained.

    python examples/sequential_error.py [--runs 1500] [--output DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mtbio.fileio import write_json
from mtbio.training.flops import machine_key
from mtbio.reporting.verdicts import simulate_sequential

HERE = Path(__file__).resolve().parent
SPREADS = (0.01, 0.02, 0.05, 0.15)  # per-seed sd of Δ, in the metric's 0-1 units


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--output", type=Path, default=HERE / "sequential_error")
    args = parser.parse_args()
    rows = []
    for sd in SPREADS:
        for design, start in (("adaptive 3 -> 8", 3), ("fixed 8", 8)):
            found = simulate_sequential(sd, max_seeds=8, start=start, edges=12, runs=args.runs, seed=1)
            per_edge = found["false_green"] + found["false_red"]
            fwer = found["family_wise_error"]
            rows.append({"sd_points": sd * 100, "design": design, "per_edge_false": per_edge,
                         "per_edge_se": (per_edge * (1 - per_edge) / (args.runs * 12)) ** 0.5,
                         "family_wise_error": fwer, "family_wise_se": (fwer * (1 - fwer) / args.runs) ** 0.5,
                         "mean_seeds": found["mean_seeds"], "undecided": found["undecided"]})
            r = rows[-1]
            print(f"sd {r['sd_points']:>4.0f} pt  {design:15s} per edge {per_edge:.4f} ± {r['per_edge_se']:.4f}  "
                  f"graphs with a false verdict {fwer:.4f} ± {r['family_wise_se']:.4f}  seeds/edge {r['mean_seeds']:.2f}")
    write_json(args.output / "summary.json",
               {"edges": 12, "alpha": 0.05, "min_delta": 0.01, "correction": "holm", "runs": args.runs,
                "machine": machine_key(), "rows": rows})


if __name__ == "__main__":
    main()
