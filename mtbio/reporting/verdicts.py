"""Whether a difference over seeds is an effect: the verdict rule shared by `pairwise`, `stilt` and
`mtbio report --compare-to`.

Verdict (the edge colour): with n ≥ 2 seeds, a two-sided paired t-test on the n per-seed Δ
(t = mean / (sd / √n), n − 1 degrees of freedom). The edge is "improves" (green) when mean Δ > 0,
p < alpha and |mean Δ| ≥ min_delta; "hurts" (red) when mean Δ < 0 under the same two conditions;
otherwise "no effect" (grey). `judge` alone, uncorrected, lets |Δ| ≥ min_delta decide a single seed;
within a family (`correct`, below) fewer than `MIN_SEEDS` seeds get no verdict. Defaults: alpha 0.05,
min_delta 0.01 (one point of a 0–1 metric).

Each Δ carries its t interval (level 1 − alpha). The tests of one graph or table form a family:
`correct` adjusts their p values (Holm by default, Benjamini–Hochberg or none) and the verdict
uses the adjusted p. An edge is decided when it is green or red, or when its whole interval lies
inside ±min_delta ("no effect larger than min_delta"); otherwise it is undecided.

No verdict is given (grey, with the reason in `withheld`) to a test with fewer than `MIN_SEEDS`
seeds, whose spread cannot be estimated usefully, or to one its caller withholds, such as an edge
into a target learned neither alone nor with its partner (both within a point of its trivial score).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping

IMPROVES, HURTS, NO_EFFECT = "improves", "hurts", "no effect"
COLOURS = {IMPROVES: "#2e7d32", HURTS: "#c62828", NO_EFFECT: "#9e9e9e"}
MIN_SEEDS = 3
RULE = ("paired two-sided t-test over seeds on the per-seed differences, p adjusted across the family of tests: "
        "improves/hurts when adjusted p < alpha and |mean delta| >= min_delta, else no effect; no verdict with fewer "
        f"than {MIN_SEEDS} seeds, or for a target within a point of its trivial score both alone and with the partner")
CORRECTIONS = ("holm", "bh", "none")
DECIDED, UNDECIDED, WITHHELD = "decided", "undecided", "withheld"

Scores = Mapping[int, float]  # seed -> primary score


@dataclass
class Evidence:
    """Mean and spread of the per-seed differences, and the verdict."""

    mean: float
    sd: float | None
    p_value: float | None
    verdict: str
    n: int
    ci: tuple[float, float] | None = None


def t_interval(deltas: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t confidence interval for the mean of `deltas` (None for fewer than 2 values)."""
    if len(deltas) < 2:
        return None
    from scipy.stats import t

    n, mean, sd = len(deltas), statistics.fmean(deltas), statistics.stdev(deltas)
    half = float(t.ppf(0.5 + level / 2, n - 1)) * sd / n ** 0.5
    return mean - half, mean + half


def judge(deltas: list[float], alpha: float, min_delta: float) -> Evidence:
    """Apply the verdict rule (module docstring) to per-seed differences, uncorrected."""
    if not deltas:
        raise ValueError("no per-seed differences to judge")
    n, mean = len(deltas), statistics.fmean(deltas)
    if abs(mean) < 1e-12:  # float round-off of identical scores
        mean = 0.0
    sd = statistics.stdev(deltas) if n >= 2 else None
    p_value: float | None = None
    if sd is not None:
        if sd == 0:
            p_value = 0.0 if mean != 0 else 1.0
        else:
            from scipy.stats import ttest_1samp

            p_value = float(ttest_1samp(deltas, 0.0).pvalue)
    return Evidence(mean, sd, p_value, verdict_of(mean, p_value, alpha, min_delta), n, t_interval(deltas, 1 - alpha))


def verdict_of(mean: float, p_value: float | None, alpha: float, min_delta: float) -> str:
    """improves / hurts / no effect from a mean Δ and its (adjusted) p."""
    significant = abs(mean) >= min_delta and (p_value is None or p_value < alpha)
    return NO_EFFECT if not significant or mean == 0 else (IMPROVES if mean > 0 else HURTS)


def adjust(p_values: list[float], method: str) -> list[float]:
    """Holm (family-wise), Benjamini–Hochberg (false discovery rate) or unadjusted p values."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction '{method}' is not one of {', '.join(CORRECTIONS)}")
    if method == "none" or not p_values:
        return list(p_values)
    if method == "bh":
        from scipy.stats import false_discovery_control

        return [float(p) for p in false_discovery_control(p_values, method="bh")]
    m, order = len(p_values), sorted(range(len(p_values)), key=lambda i: p_values[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def verdict_text(cell: Mapping[str, Any]) -> str:
    """A cell's verdict as every page and console line writes it: "no verdict (why)" for a cell withheld or with
    fewer than `MIN_SEEDS` seeds, else improves / hurts / no effect."""
    seeds = cell.get("n_seeds", MIN_SEEDS)
    if cell.get("withheld"):
        return f"no verdict ({cell['withheld']})"
    if seeds < MIN_SEEDS:
        return f"no verdict ({seeds} seed{'s' if seeds != 1 else ''}: a verdict needs at least {MIN_SEEDS})"
    return str(cell["verdict"])


def state_of(cell: Mapping[str, Any], min_delta: float) -> str:
    """decided (green, red, or the whole interval inside ±min_delta), undecided, or withheld (judged
    by the caller not to be testable, whatever the seeds)."""
    if cell.get("withheld") and cell.get("n_seeds", MIN_SEEDS) >= MIN_SEEDS:
        return WITHHELD
    if cell.get("withheld"):
        return UNDECIDED
    if cell["verdict"] != NO_EFFECT:
        return DECIDED
    ci = cell.get("ci")
    return DECIDED if ci is not None and -min_delta < ci[0] and ci[1] < min_delta else UNDECIDED


def correct(cells: Mapping[str, dict[str, Any]], method: str, alpha: float, min_delta: float) -> dict[str, Any]:
    """Adjust the p of every named cell (a `compare` result) across the family, re-judge it with the
    adjusted p and record its state; returns the family's description. A cell with fewer than
    `MIN_SEEDS` seeds, or one whose `withheld` names a reason, gets no verdict (no effect)."""
    tested = [name for name, cell in cells.items() if cell["p_value"] is not None]
    adjusted = adjust([cells[name]["p_value"] for name in tested], method)
    for name, cell in cells.items():
        cell["p_adjusted"] = adjusted[tested.index(name)] if name in tested else None
        seeds = cell.get("n_seeds", MIN_SEEDS)
        if seeds < MIN_SEEDS and not cell.get("withheld"):
            cell["withheld"] = f"{seeds} seed{'s' if seeds != 1 else ''}: a verdict needs at least {MIN_SEEDS}"
        cell["verdict"] = (NO_EFFECT if cell.get("withheld")
                           else verdict_of(cell["delta"], cell["p_adjusted"], alpha, min_delta))
        cell["state"] = state_of(cell, min_delta)
    return {"correction": method, "m": len(tested), "tests": tested}


def summary(scores: Scores) -> dict[str, Any]:
    """Mean, sd (None for one seed) and the per-seed values of a score."""
    values = list(scores.values())
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
            "per_seed": {str(s): v for s, v in sorted(scores.items())}}


def compare(with_scores: Scores, alone: Scores, sign: float, alpha: float, min_delta: float) -> dict[str, Any]:
    """Δ per seed (seeds present in both), its evidence and the per-seed values."""
    seeds = sorted(set(with_scores) & set(alone))
    deltas = [sign * (with_scores[s] - alone[s]) for s in seeds]
    evidence = judge(deltas, alpha, min_delta)
    return {"delta": evidence.mean, "sd": evidence.sd, "ci": evidence.ci, "p_value": evidence.p_value,
            "verdict": evidence.verdict, "n_seeds": evidence.n, "score": summary({s: with_scores[s] for s in seeds}),
            "per_seed": {str(s): {"with": with_scores[s], "alone": alone[s], "delta": d} for s, d in zip(seeds, deltas)}}


def simulate_sequential(sd: float, max_seeds: int, alpha: float = 0.05, min_delta: float = 0.01, start: int = 3,
                        edges: int = 12, correction: str = "holm", runs: int = 500, seed: int = 0) -> dict[str, float]:
    """The adaptive-seed design under no true effect (Δ = 0, per-seed sd `sd`) on a graph of `edges`
    independent edges: the share of edges ending green, red, decided "no effect" and undecided at
    `max_seeds`, the mean seeds per edge, and the family-wise error: the share of graphs ending with at least one
    green or red edge, over `runs` simulated graphs (`start` = `max_seeds` is the fixed-seed design)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ends = {IMPROVES: 0, HURTS: 0, NO_EFFECT: 0, UNDECIDED: 0}
    seeds_used = graphs_wrong = 0
    for _ in range(runs):
        deltas = [list(rng.normal(0.0, sd, start)) for _ in range(edges)]
        while True:
            cells = {}
            for i, values in enumerate(deltas):
                ev = judge(values, alpha, min_delta)
                cells[str(i)] = {"delta": ev.mean, "p_value": ev.p_value, "ci": ev.ci, "verdict": ev.verdict,
                                 "n_seeds": ev.n}
            correct(cells, correction, alpha, min_delta)
            grow = [i for i, values in enumerate(deltas) if cells[str(i)]["state"] == UNDECIDED
                    and len(values) < max_seeds]
            if not grow:
                break
            for i in grow:
                deltas[i].append(float(rng.normal(0.0, sd)))
        for i, values in enumerate(deltas):
            cell = cells[str(i)]
            ends[cell["verdict"] if cell["state"] == DECIDED else UNDECIDED] += 1
            seeds_used += len(values)
        graphs_wrong += any(cell["verdict"] != NO_EFFECT for cell in cells.values())
    total = runs * edges
    return {"false_green": ends[IMPROVES] / total, "false_red": ends[HURTS] / total,
            "no_effect": ends[NO_EFFECT] / total, "undecided": ends[UNDECIDED] / total,
            "mean_seeds": seeds_used / total, "family_wise_error": graphs_wrong / runs}
