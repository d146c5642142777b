"""Whether a difference over seeds is an effect: the verdict rule shared by `pairwise`, `stilt` and
`mtbio report --compare-to`.

Verdict (the edge colour): with n ≥ 2 seeds, a two-sided paired t-test on the n per-seed Δ
(t = mean / (sd / √n), n − 1 degrees of freedom). The edge is "improves" (green) when mean Δ > 0,
p < alpha and |mean Δ| ≥ min_delta; "hurts" (red) when mean Δ < 0 under the same two conditions;
otherwise "no effect" (grey). With a single seed there is no spread to test against, so only
|Δ| ≥ min_delta decides. Defaults: alpha 0.05, min_delta 0.01 (one point of a 0–1 metric).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping

IMPROVES, HURTS, NO_EFFECT = "improves", "hurts", "no effect"
COLOURS = {IMPROVES: "#2e7d32", HURTS: "#c62828", NO_EFFECT: "#9e9e9e"}
RULE = ("paired two-sided t-test over seeds on the per-seed differences: improves/hurts when p < alpha and "
        "|mean delta| >= min_delta, else no effect; with one seed only |delta| >= min_delta decides")

Scores = Mapping[int, float]  # seed -> primary score


@dataclass
class Evidence:
    """Mean and spread of the per-seed differences, and the verdict."""

    mean: float
    sd: float | None
    p_value: float | None
    verdict: str
    n: int


def judge(deltas: list[float], alpha: float, min_delta: float) -> Evidence:
    """Apply the verdict rule (module docstring) to per-seed differences."""
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
    significant = abs(mean) >= min_delta and (p_value is None or p_value < alpha)
    verdict = NO_EFFECT if not significant or mean == 0 else (IMPROVES if mean > 0 else HURTS)
    return Evidence(mean, sd, p_value, verdict, n)


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
    return {"delta": evidence.mean, "sd": evidence.sd, "p_value": evidence.p_value, "verdict": evidence.verdict,
            "n_seeds": evidence.n, "score": summary({s: with_scores[s] for s in seeds}),
            "per_seed": {str(s): {"with": with_scores[s], "alone": alone[s], "delta": d} for s, d in zip(seeds, deltas)}}
