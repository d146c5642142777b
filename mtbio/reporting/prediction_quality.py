"""How well a predicted task-relation graph answers "for my target, which partners?": figures within
each target (its partners ranked by the prediction against their measured Δ), averaged over targets.

Per target with at least three partners: Spearman and Kendall; top-1 hit (the predicted best partner is
the measured best) against chance (1 / partners); NDCG@k with gains Δ − (the target's lowest Δ);
regret@k, the measured Δ lost by taking the predicted top k instead of the best partner. The mean
within-target Spearman gets a two-sided permutation p (each target's predicted scores shuffled among its
partners; a mean at least as far from 0 either way: exact, by convolving the targets' tables of all their arrangements, where no target has more
than six partners; else 20,000 random arrangements), a bootstrap
interval over targets, and its fraction of the noise ceiling: the square root of the reliability of
the measured K-seed mean, K·r₁ / (1 + (K−1)·r₁), r₁ the mean Spearman between two seeds' within-target
rankings.
"""
from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import kendalltau, spearmanr

Pair = tuple[str, str]  # (source, target)
PERMUTATIONS = 20_000
TABLE_LIMIT = 720  # targets with up to 6 partners: the exact null distribution; more: random arrangements
BOOTSTRAP = 2000


def _partners(graph: Mapping[Pair, float], other: Mapping[Pair, float], target: str) -> list[str]:
    return sorted(s for s, t in graph if t == target and (s, t) in other)


def _rho(x: Sequence[float], y: Sequence[float]) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0  # a constant ranking carries no order
    return float(spearmanr(x, y).statistic)


def _tie_blocks(predicted: Sequence[float]) -> list[list[int]]:
    """Indices grouped by equal predicted score, best group first."""
    order = sorted(range(len(predicted)), key=lambda i: -predicted[i])
    return [list(group) for _, group in itertools.groupby(order, key=lambda i: predicted[i])]


def ndcg_at(k: int, predicted: Sequence[float], measured: Sequence[float]) -> float:
    """NDCG@k of the order `predicted` gives, with gains measured − min(measured) (1.0 if all gains are 0);
    tied predictions count as a random order among themselves (each place of a tied block gets its mean gain)."""
    gains = np.asarray(measured, dtype=float) - min(measured)
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    placed = [float(np.mean(gains[block])) for block in _tie_blocks(predicted) for _ in block][:k]
    ideal = float(np.sort(gains)[::-1][:k] @ discounts[:min(k, len(gains))])
    return float(np.asarray(placed) @ discounts[:len(placed)]) / ideal if ideal > 0 else 1.0


def regret_at(k: int, predicted: Sequence[float], measured: Sequence[float]) -> float:
    """max(measured) − the best measured Δ among the predicted top k, averaged over the ways ties at the cut
    can fall (a constant prediction gets the regret of a random pick)."""
    y = np.asarray(measured, dtype=float)
    taken: list[int] = []
    for block in _tie_blocks(predicted):
        room = k - len(taken)
        if len(block) <= room:
            taken += block
            continue
        best = [max(y[taken + list(pick)]) for pick in itertools.combinations(block, room)] if room else [max(y[taken])]
        return float(max(y) - np.mean(best))
    return float(max(y) - max(y[taken]))


def per_target(predicted: Mapping[Pair, float], measured: Mapping[Pair, float], tasks: Sequence[str],
               ks: Sequence[int] = (1, 2)) -> dict[str, dict[str, Any]]:
    """{target: its figures} for each target with at least three partners in both graphs."""
    out = {}
    for target in tasks:
        partners = _partners(predicted, measured, target)
        if len(partners) < 3:
            continue
        x = [predicted[(s, target)] for s in partners]
        y = [measured[(s, target)] for s in partners]
        tied_best = _tie_blocks(x)[0]
        out[target] = {
            "partners": len(partners), "spearman": _rho(x, y),
            "kendall": float(kendalltau(x, y).statistic) if np.ptp(x) and np.ptp(y) else 0.0,
            "top1": float(np.mean([y[i] == max(y) for i in tied_best])), "chance_top1": 1.0 / len(partners),
            **{f"ndcg@{k}": ndcg_at(k, x, y) for k in ks if k < len(partners)},
            **{f"regret@{k}": regret_at(k, x, y) for k in ks if k < len(partners)}}
    return out


def permutation_p(predicted: Mapping[Pair, float], measured: Mapping[Pair, float], tasks: Sequence[str],
                  seed: int = 0, two_sided: bool = True) -> tuple[float, bool]:
    """(p of the mean within-target Spearman under shuffled predictions, whether exact). Two-sided by default (a
    mean as far from 0 in either direction); `two_sided=False`: one-sided, a mean at least as high."""
    targets = [t for t in tasks if len(_partners(predicted, measured, t)) >= 3]
    blocks = [([predicted[(s, t)] for s in _partners(predicted, measured, t)],
               [measured[(s, t)] for s in _partners(predicted, measured, t)]) for t in targets]
    if not blocks:
        return float("nan"), True
    observed = statistics.fmean(_rho(x, y) for x, y in blocks)
    if all(math.factorial(len(x)) <= TABLE_LIMIT for x, _ in blocks):
        # exact: each block's shuffled Spearman is one of its arrangements' values, all equally likely, so the
        # null distribution of the sum is the convolution of the blocks' tables
        sums: Counter[float] = Counter({0.0: 1})
        for x, y in blocks:
            table = [_rho(list(p), y) for p in itertools.permutations(x)]
            step: Counter[float] = Counter()
            for total, count in sums.items():
                for value in table:
                    step[round(total + value, 9)] += count
            sums = step
        hits = sum(count for total, count in sums.items() if _as_extreme(total / len(blocks), observed, two_sided))
        return hits / sum(sums.values()), True
    rng = np.random.default_rng(seed)
    hits = sum(_as_extreme(statistics.fmean(_rho(list(rng.permutation(x)), y) for x, y in blocks), observed, two_sided)
               for _ in range(PERMUTATIONS))
    return (hits + 1) / (PERMUTATIONS + 1), False


def _as_extreme(value: float, observed: float, two_sided: bool) -> bool:
    return abs(value) >= abs(observed) - 1e-9 if two_sided else value >= observed - 1e-9


def bootstrap_targets(values: Sequence[float], rounds: int = BOOTSTRAP, seed: int = 0) -> list[float]:
    """95% percentile interval of the mean over targets, the targets resampled with replacement."""
    if len(values) < 2:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    means = [float(np.mean(rng.choice(values, len(values)))) for _ in range(rounds)]
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def within_target_ceiling(per_seed: Mapping[Pair, Mapping[str, float]], tasks: Sequence[str]) -> dict[str, Any]:
    """Seed-pair agreement r₁ of the measured within-target rankings, the reliability of their K-seed mean
    and its square root, the ceiling of any predictor's within-target Spearman (None where undefined)."""
    seeds = sorted(set.intersection(*(set(v) for v in per_seed.values()))) if per_seed else []
    agreements = []
    for a, b in itertools.combinations(seeds, 2):
        rhos = []
        for target in tasks:
            partners = sorted(s for s, t in per_seed if t == target)
            if len(partners) >= 3:
                rhos.append(_rho([per_seed[(s, target)][a] for s in partners],
                                 [per_seed[(s, target)][b] for s in partners]))
        if rhos:
            agreements.append(statistics.fmean(rhos))
    if not agreements:
        return {"seeds": len(seeds), "r1": None, "reliability": None, "ceiling": None}
    r1, k = statistics.fmean(agreements), len(seeds)
    reliability = k * r1 / (1 + (k - 1) * r1) if 1 + (k - 1) * r1 != 0 else None
    ceiling = math.sqrt(reliability) if reliability is not None and reliability > 0 else 0.0
    return {"seeds": k, "r1": r1, "reliability": reliability, "ceiling": ceiling}


def is_symmetric(predicted: Mapping[Pair, float]) -> bool:
    """Whether score(s → t) = score(t → s) for every pair (such a predictor cannot tell the directions apart)."""
    return all(abs(v - predicted.get((t, s), v)) <= 1e-12 * max(1.0, abs(v)) for (s, t), v in predicted.items())


def within_target_summary(predicted: Mapping[Pair, float], measured: Mapping[Pair, float], tasks: Sequence[str],
                          ceiling: Mapping[str, Any]) -> dict[str, Any]:
    """The averaged within-target figures, with the permutation p, the bootstrap interval and the
    fraction of the ceiling."""
    targets = per_target(predicted, measured, tasks)
    if not targets:
        return {"targets": 0}
    rhos = [v["spearman"] for v in targets.values()]
    mean = (lambda key: statistics.fmean(v[key] for v in targets.values() if key in v)
            if any(key in v for v in targets.values()) else None)
    p, exact = permutation_p(predicted, measured, tasks)
    spearman = statistics.fmean(rhos)
    top = ceiling.get("ceiling")
    return {"targets": len(targets), "spearman": spearman, "spearman_interval": bootstrap_targets(rhos),
            "permutation_p": p, "permutation_exact": exact, "kendall": mean("kendall"), "top1": mean("top1"),
            "chance_top1": mean("chance_top1"), "ndcg@1": mean("ndcg@1"), "ndcg@2": mean("ndcg@2"),
            "regret@1": mean("regret@1"), "regret@2": mean("regret@2"),
            "fraction_of_ceiling": spearman / top if top else None, "symmetric": is_symmetric(predicted),
            "per_target": targets}
