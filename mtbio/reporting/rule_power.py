"""What the decision rule can decide: its states simulated on whole graphs at once (numpy over graphs and edges,
the same p values, spending, calibration and Holm as `verdicts.correct`), and the smallest effect each state reaches
at a number of seeds (the noncentral t), with the seeds an effect needs.

`simulate_states` runs a seed design on `runs` graphs of independent edges, per-seed Δ ~ Normal(mean, sd): a fixed
number of seeds, or adaptive (each undecided edge one more seed per round up to the cap, optionally stopped for
futility once its look p against 0 exceeds `futility`), judged by rule v3 after every round. `detectable` gives, per
state, the smallest true Δ it reaches in `power` of studies at n seeds with the level Holm gives the first of m tests
(alpha / m, the strictest), and `seeds_needed` the fewest seeds that reach a given Δ.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mtbio.reporting.spending import look_weights
from mtbio.reporting.verdicts import null_minimum

BEYOND, WITHIN, NONE = "beyond", "within", "none"  # the size a verdict claims


def _t_p(mean: np.ndarray, se: np.ndarray, df: np.ndarray | float, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided p of the interval against 0 (shift 0) or beyond / inside ±shift, element-wise."""
    from scipy.special import stdtr

    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = 2 * np.minimum(stdtr(df, -(mean - shift) / se), stdtr(df, -(-mean - shift) / se))
        inside = 2 * stdtr(df, -np.minimum(shift - mean, shift + mean) / se)
    return np.minimum(beyond, 1.0), np.minimum(inside, 1.0)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p values along the last axis (the edges of each graph)."""
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    ranked = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    out = np.empty_like(p)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out


@dataclass(frozen=True)
class Design:
    """A seed design: `first` … `last` seeds (first == last: fixed), and the futility bound (None: none)."""

    name: str
    first: int
    last: int
    futility: float | None = None


def simulate_states(means: np.ndarray, sd: float, design: Design, min_delta: float = 0.01, alpha: float = 0.05,
                    runs: int = 2000, seed: int = 0, spending: str = "obrien-fleming") -> dict[str, np.ndarray]:
    """Rule v3 on `runs` graphs whose edges have true mean Δ `means` (one per edge). Returns per graph and edge the
    claimed direction (+1, −1, 0), the claimed size ("beyond", "within", "none" for no size claimed; "within" also
    for "no effect beyond the threshold") and the seeds used."""
    rng = np.random.default_rng(seed)
    edges = len(means)
    x = rng.standard_normal((runs, edges, design.last)) * sd + np.asarray(means)[None, :, None]
    weights = look_weights(design.first, design.last, spending, alpha)
    sample = null_minimum(design.first, design.last, spending, alpha) if len(weights) > 1 else None
    sums, squares = np.cumsum(x, axis=2), np.cumsum(x * x, axis=2)
    lowest = {kind: np.full((runs, edges), np.inf) for kind in ("zero", "beyond", "inside")}
    seeds = np.full((runs, edges), design.first)
    active = np.ones((runs, edges), dtype=bool)
    signs = {"zero": np.zeros((runs, edges)), "beyond": np.zeros((runs, edges))}
    for n in range(design.first, design.last + 1):
        mean = sums[:, :, n - 1] / n
        se = np.sqrt(np.maximum(squares[:, :, n - 1] - n * mean * mean, 0.0) / (n - 1) / n)
        zero, _ = _t_p(mean, se, n - 1, 0.0)
        beyond, inside = _t_p(mean, se, n - 1, min_delta)
        for kind, p in (("zero", zero), ("beyond", beyond), ("inside", inside)):
            better = active & (np.minimum(1.0, p / weights[n]) < lowest[kind])
            lowest[kind] = np.where(better, np.minimum(1.0, p / weights[n]), lowest[kind])
            if kind != "inside":  # the sign a claim reads is the mean's at the look its p came from
                signs[kind] = np.where(better, np.sign(mean), signs[kind])
        seeds = np.where(active, n, seeds)
        calibrated = {kind: (np.minimum(1.0, (1 + np.searchsorted(sample, v, side="right")) / (len(sample) + 1))
                             if sample is not None else v) for kind, v in lowest.items()}
        passed = {kind: holm(v) < alpha for kind, v in calibrated.items()}
        decided = passed["zero"] | passed["beyond"] | passed["inside"]
        active = active & ~decided
        if design.futility is not None and n >= design.first + 1:
            active = active & ~(zero > design.futility)
    direction = np.where(passed["beyond"], signs["beyond"], np.where(passed["zero"], signs["zero"], 0)).astype(int)
    size = np.where(passed["beyond"], BEYOND, np.where(passed["inside"], WITHIN, NONE))
    return {"direction": direction, "size": size, "seeds": seeds}


def error_rates(found: dict[str, np.ndarray], means: np.ndarray, min_delta: float = 0.01) -> dict[str, float]:
    """Family-wise rates over the graphs: a false direction (a sign claimed against the true one, or any sign for a
    true zero) and a false size (beyond claimed for |Δ| ≤ min_delta, within claimed for |Δ| ≥ min_delta)."""
    true = np.asarray(means)[None, :]
    direction, size = found["direction"], found["size"]
    wrong_direction = (direction != 0) & (direction != np.sign(true))
    wrong_size = ((size == BEYOND) & (np.abs(true) <= min_delta)) | ((size == WITHIN) & (np.abs(true) >= min_delta))
    return {"false_direction": float(wrong_direction.any(axis=1).mean()),
            "false_size": float(wrong_size.any(axis=1).mean()),
            "false_any": float((wrong_direction | wrong_size).any(axis=1).mean()),
            "mean_seeds": float(found["seeds"].mean())}


# ---- the smallest effect each state reaches ------------------------------------------------------------------------
def _power_beyond(effect: float, shift: float, sd: float, n: int, level: float) -> float:
    """P(the (1 − level) t interval of n seeds lies wholly above +shift) at true mean `effect`."""
    from scipy.stats import nct, t

    return float(nct.sf(t.ppf(1 - level / 2, n - 1), n - 1, (effect - shift) * np.sqrt(n) / sd))


def _power_inside(sd: float, n: int, level: float, min_delta: float) -> float:
    """P(the (1 − level) t interval of n seeds lies wholly inside ±min_delta) at a true mean of 0, by the sd's
    chi-square law and the mean's normal law (numerical integration over the sd)."""
    from scipy.stats import chi2, norm, t

    q = t.ppf(1 - level / 2, n - 1)
    s = np.linspace(1e-6, 4, 4001) * sd  # the sample sd's range
    density = chi2.pdf((n - 1) * s ** 2 / sd ** 2, n - 1) * 2 * (n - 1) * s / sd ** 2
    room = np.maximum(min_delta - q * s / np.sqrt(n), 0.0)  # |mean| must be below this
    inside = 2 * norm.cdf(room * np.sqrt(n) / sd) - 1
    return float(np.trapezoid(inside * density, s))


def detectable(sd: float, n: int, m: int, min_delta: float = 0.01, alpha: float = 0.05,
               power: float = 0.8) -> dict[str, float | None]:
    """Per state, the smallest true Δ it reaches in `power` of studies at n seeds among m comparisons (level
    alpha / m): "direction" (higher / lower, any size), "beyond" (by more than the threshold); and "no_effect",
    the chance a true zero is shown within the threshold."""
    from scipy.optimize import brentq

    level = alpha / max(m, 1)
    direction = brentq(lambda d: _power_beyond(d, 0.0, sd, n, level) - power, 0.0, 100 * sd + 1)
    return {"direction": direction, "beyond": min_delta + direction,
            "no_effect": _power_inside(sd, n, level, min_delta)}


def seeds_needed(effect: float, sd: float, m: int, min_delta: float = 0.01, alpha: float = 0.05,
                 power: float = 0.8, most: int = 200) -> dict[str, int | None]:
    """The fewest seeds (up to `most`) at which a true Δ of `effect` is called higher in `power` of studies, and
    higher by more than the threshold (None: not within `most`)."""
    level = alpha / max(m, 1)
    found: dict[str, int | None] = {"direction": None, "beyond": None}
    for n in range(2, most + 1):
        for key, shift in (("direction", 0.0), ("beyond", min_delta)):
            if found[key] is None and effect > shift and _power_beyond(effect, shift, sd, n, level) >= power:
                found[key] = n
        if all(v is not None for v in found.values()):
            break
    return found


def power_lines(sd: float, n: int, m: int, min_delta: float = 0.01, alpha: float = 0.05, effect: float | None = None,
                basis: str = "given", scale: float = 100.0, power: float = 0.8) -> list[str]:
    """What a study of `m` comparisons at `n` seeds can decide with per-seed sd of Δ `sd` (`basis`: where it came
    from), in points (`scale` 100; 1: the metric's units): the smallest effect each state reaches in `power` of
    studies, and the seeds `effect` (default twice the threshold) needs."""
    unit = " points" if scale == 100 else ""
    threshold = f"{scale * min_delta:g}" + (" point" if scale * min_delta == 1 else unit)
    found = detectable(sd, n, m, min_delta, alpha, power)
    effect = 2 * min_delta if effect is None else effect
    needs = seeds_needed(effect, sd, m, min_delta, alpha, power)
    seeds = {k: f"{v} seeds" if v is not None else "more than 200 seeds" for k, v in needs.items()}
    return [f"detectable effects at {n} seeds over {m} comparison(s) (alpha {alpha:g}, the first Holm level "
            f"{alpha / max(m, 1):.3g}), per-seed sd of Δ {scale * sd:.3g}{unit} ({basis}), in {power:.0%} of studies:",
            f"  higher / lower (size not settled or more): true |Δ| ≥ {scale * found['direction']:.2f}{unit}",
            f"  higher / lower by more than the threshold ({threshold}): true |Δ| ≥ "
            f"{scale * found['beyond']:.2f}{unit}",
            f"  no effect beyond the threshold: a true Δ of 0 is shown inside ±{threshold} in "
            f"{found['no_effect']:.0%} of studies",
            f"  a true Δ of {scale * effect:+.2f}{unit} needs {seeds['direction']} to be called higher, "
            f"{seeds['beyond']} to be called higher by more than the threshold"]
