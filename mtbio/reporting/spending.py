"""Alpha-spending functions of the group-sequential decision rule (Lan and DeMets 1983).

A study that adds seeds to undecided comparisons looks at each one several times: at `first` seeds, `first` + 1,
... up to `last`. A spending function A(t) gives the share of the significance level alpha that may be spent by
the information fraction t = seeds / last (A(0) = 0, A(1) = alpha); look k may spend A(t_k) − A(t_{k−1}).
`look_weights` gives each look its share w_k of alpha (the w sum to 1): the decision rule
(`mtbio.reporting.verdicts.sequential_p`) compares each look's p with its w_k and calibrates the smallest ratio
over the looks by its null distribution, so the shape of A decides which looks get the level.

- `obrien-fleming` (Lan–DeMets O'Brien–Fleming type, A(t) = 2 − 2Φ(z_{1−alpha/2} / √t)): little at the first looks,
  most at the last; the default, chosen by simulated power (examples/sequential_error.md): at 3 or 4 seeds the t
  interval is too wide to settle a comparison against a one-point threshold, so level spent there is lost.
- `pocock` (Lan–DeMets Pocock type, A(t) = alpha · ln(1 + (e − 1)·t)): about half of it at the first of six looks,
  the rest evenly.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

from mtbio.registry import Registry

SpendingFn = Callable[[float, float], float]  # (information fraction t, alpha) -> alpha spent by t
SPENDING: Registry[SpendingFn] = Registry("alpha-spending function")


@SPENDING.register("pocock")
def pocock(t: float, alpha: float) -> float:
    """Lan–DeMets Pocock-type spending: alpha · ln(1 + (e − 1)·t)."""
    return alpha * math.log(1 + (math.e - 1) * t)


@SPENDING.register("obrien-fleming")
def obrien_fleming(t: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: 2 − 2Φ(z_{1−alpha/2} / √t)."""
    from scipy.stats import norm

    return 0.0 if t <= 0 else float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(t)))


@functools.lru_cache(maxsize=64)
def look_weights(first: int, last: int, spending: str, alpha: float) -> dict[int, float]:
    """Seeds at each look (`first` … `last`) → that look's share of alpha; one look (weight 1) when first ≥ last."""
    if first >= last:
        return {last: 1.0}
    fn = SPENDING.get(spending)
    spent = [fn(n / last, alpha) for n in range(first, last + 1)]
    return {n: (spent[i] - (spent[i - 1] if i else 0.0)) / alpha for i, n in enumerate(range(first, last + 1))}
