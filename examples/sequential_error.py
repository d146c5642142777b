"""The decision rule's graph-wide error under adaptive seeds, and its power (issues 63 (c) and 64): a graph of 12 edges,
each edge's per-seed Δ drawn with the spreads seen in the committed graphs (1, 2, 5 and 15 points), judged with Holm
over the graph after every added seed (`--seeds auto`: start 3, up to 8) or once at a fixed 8 seeds, by rule v1 and
by rule v2 (both spending functions). Global null: no edge has an effect; the share of edges ending falsely green or
red, and the share of graphs ending with at least one (family-wise). Power: one edge with a true +2 points among 11
null ones; the share of graphs where it ends green. Each figure with its Monte Carlo standard error. Nothing is
trained.

    python examples/sequential_error.py [--runs 1500] [--power-runs 500] [--output DIR]

Rule v3 (issue 92), vectorized (`mtbio.reporting.rule_power`, the same p values, spending, calibration and Holm as
the rule itself): the family-wise rate of a false direction and of a false size, on null graphs, on graphs whose 12
edges all sit on the threshold (+1 point: every size claim is false there) and with one +2-point edge among 11 null
ones (power), at fixed 8 and 6 seeds and at adaptive 3 -> 8 seeds with and without a futility stop;
`--part v3` runs that part alone (`--v3-runs` graphs per row), into v3.json.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mtbio.fileio import write_json
from mtbio.reporting.rule_power import Design, error_rates, simulate_states
from mtbio.reporting.verdicts import Rule, simulate_sequential
from mtbio.training.flops import machine_key

HERE = Path(__file__).resolve().parent
SPREADS = (0.01, 0.02, 0.05, 0.15)  # per-seed sd of Δ, in the metric's 0-1 units
POWER_SPREADS = (0.005, 0.01, 0.02)
RULES = {"v1": Rule(version="v1"), "v2 (obrien-fleming)": Rule(), "v2 (pocock)": Rule(spending="pocock")}
DESIGNS = (("adaptive 3 -> 8", 3), ("fixed 8", 8))
V3_DESIGNS = (Design("fixed 8", 8, 8), Design("fixed 6", 6, 6), Design("adaptive 3 -> 8", 3, 8),
              Design("adaptive 3 -> 8, futility p > 0.5", 3, 8, futility=0.5))
V3_SCENARIOS = {"null": (SPREADS, [0.0] * 12), "on the threshold": (POWER_SPREADS, [0.01] * 12),
                "one +2-point edge": (POWER_SPREADS, [0.02] + [0.0] * 11)}


def _se(share: float, n: int) -> float:
    return (share * (1 - share) / n) ** 0.5


def v3_rows(runs: int) -> list[dict]:
    """Rule v3's family-wise false-direction and false-size rates, power and seeds per edge, per design, scenario
    and spread, each rate with its Monte Carlo standard error."""
    rows = []
    for design in V3_DESIGNS:
        for scenario, (spreads, means) in V3_SCENARIOS.items():
            for sd in spreads:
                found = simulate_states(np.array(means), sd, design, runs=runs, seed=7)
                rates = error_rates(found, np.array(means))
                row = {"design": design.name, "scenario": scenario, "sd_points": sd * 100, **rates,
                       "se": {k: _se(rates[k], runs) for k in ("false_direction", "false_size", "false_any")},
                       "no_effect_decided": float(((found["size"] == "within") & (found["direction"] == 0)).mean())}
                if scenario == "one +2-point edge":
                    higher, beyond = found["direction"][:, 0] == 1, found["size"][:, 0] == "beyond"
                    row.update(power_higher=float(higher.mean()), power_beyond=float((higher & beyond).mean()),
                               power_se=_se(float(higher.mean()), runs))
                rows.append(row)
                print(f"v3 {design.name:35s} {scenario:18s} sd {sd * 100:>4.1f} pt  false direction "
                      f"{rates['false_direction']:.4f}  false size {rates['false_size']:.4f}  seeds "
                      f"{rates['mean_seeds']:.2f}" + (f"  power {row['power_higher']:.3f} / {row['power_beyond']:.3f}"
                                                       if "power_higher" in row else ""), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--power-runs", type=int, default=500)
    parser.add_argument("--v3-runs", type=int, default=4000)
    parser.add_argument("--part", choices=("all", "v2", "v3"), default="all")
    parser.add_argument("--output", type=Path, default=HERE / "sequential_error")
    args = parser.parse_args()
    if args.part in ("all", "v3"):
        write_json(args.output / "v3.json", {"edges": 12, "alpha": 0.05, "min_delta": 0.01, "correction": "holm",
                                             "runs": args.v3_runs, "machine": machine_key(),
                                             "rows": v3_rows(args.v3_runs)})
    if args.part == "v3":
        return
    null, power = [], []
    for name, rule in RULES.items():
        for design, start in DESIGNS:
            if design.startswith("fixed") and "pocock" in name:
                continue  # one look: the spending function plays no part
            for sd in SPREADS:
                found = simulate_sequential(sd, max_seeds=8, rule=rule, start=start, edges=12, runs=args.runs, seed=1)
                per_edge, fwer = found["false_green"] + found["false_red"], found["family_wise_error"]
                null.append({"rule": name, "design": design, "sd_points": sd * 100, "per_edge_false": per_edge,
                             "per_edge_se": _se(per_edge, args.runs * 12), "family_wise_error": fwer,
                             "family_wise_se": _se(fwer, args.runs), "decided_no_effect": found["no_effect"],
                             "undecided": found["undecided"], "mean_seeds": found["mean_seeds"]})
                print(f"null  {name:20s} {design:15s} sd {sd * 100:>4.1f} pt  per edge {per_edge:.4f}  "
                      f"family-wise {fwer:.4f} ± {null[-1]['family_wise_se']:.4f}  seeds {found['mean_seeds']:.2f}",
                      flush=True)
            for sd in POWER_SPREADS:
                found = simulate_sequential(sd, max_seeds=8, rule=rule, start=start, edges=12, runs=args.power_runs,
                                            seed=2, true_delta=0.02, true_edges=1)
                power.append({"rule": name, "design": design, "sd_points": sd * 100, "true_delta_points": 2.0,
                              "power": found["power"], "power_se": _se(found["power"], args.power_runs),
                              "family_wise_error": found["family_wise_error"], "mean_seeds": found["mean_seeds"]})
                print(f"power {name:20s} {design:15s} sd {sd * 100:>4.1f} pt  power {found['power']:.3f} ± "
                      f"{power[-1]['power_se']:.3f}", flush=True)
    write_json(args.output / "summary.json",
               {"edges": 12, "alpha": 0.05, "min_delta": 0.01, "correction": "holm", "runs": args.runs,
                "power_runs": args.power_runs, "machine": machine_key(), "null": null, "power": power})


if __name__ == "__main__":
    main()
