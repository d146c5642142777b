"""Whether a difference over seeds is an effect: the decision rule shared by `pairwise`, `stilt`, `transfer`,
`select` and `mtbio report --compare-to`.

`compare` measures one comparison: the per-seed differences Δ (sign-flipped where lower is better), their mean, sd,
two-sided t interval at 95% and two-sided t-test p against 0. The comparisons of one graph, matrix or table form a
family, judged together by `correct` under a `Rule`. Two rule versions are registered (`--rule`):

**v2** (the default). Each comparison's threshold is its metric's registered `min_delta` (one point of a 0–1
score; `--min-delta` replaces it, in the metric's own units). At each look (each seed count the study looked at: one
look for a fixed number of seeds; `first` … `last` seeds for adaptive seeds, its share w of alpha from an
alpha-spending function, `mtbio.reporting.spending`) two two-sided p values are read off the t interval:
p_beyond, the smallest a at which the (1 − a) interval lies wholly beyond ±min_delta, and p_inside, the smallest a
at which it lies wholly inside. Each comparison keeps min over looks of p / w (a valid p value whatever the
stopping), and Holm (or the `correction` asked) runs over the family for each of the two. Three states follow:
- **larger than the threshold** (green "improves" or red "hurts"): adjusted p_beyond < alpha, i.e. the interval at
  the level the family allowed it lies wholly above +min_delta or below −min_delta;
- **smaller than the threshold** ("no effect", decided): adjusted p_inside < alpha, the interval wholly inside;
- **undecided** otherwise. The point estimate alone decides nothing.
The interval each comparison shows (`ci`, at `ci_level`) is the one its state was read from: a decided one's at the
level its test passed at, an undecided one's at the family's widest level (alpha / m at its last look), where it
lies neither wholly beyond nor wholly inside. Under the global null
the chance that a family ends with any green or red comparison is at most alpha however seeds were added
(`simulate_sequential` measures it).

**v1** (the rule before, for comparison): a two-sided paired t-test against 0 at the last look, the family's p
adjusted, improves/hurts when adjusted p < alpha and |mean Δ| ≥ min_delta (0.01 in raw units), else no effect;
decided when coloured or when the 95% interval lies inside ±min_delta. Its family-wise error under adaptive seeds
exceeds alpha (examples/sequential_error.md).

**v3** (the equivalence and minimum-effect reading, Lakens 2017/2018). Besides v2's p_beyond and p_inside, each
comparison has p_zero, the two-sided t-test p against 0, spent over the looks and calibrated the same way; Holm runs
over the family for each of the three. Seven states follow, read from the interval against 0 and ±min_delta:
- **higher / lower by more than the threshold**: adjusted p_beyond < alpha (v2's improves / hurts);
- **higher / lower, size not settled**: adjusted p_zero < alpha, the interval excludes 0 but reaches past the
  threshold;
- **higher / lower, within the threshold**: adjusted p_zero < alpha and adjusted p_inside < alpha: a real effect
  smaller than the threshold;
- **no effect beyond the threshold**: adjusted p_inside < alpha, the interval includes 0;
- **undecided** otherwise.
A claim of a direction (any higher / lower) is wrong at most alpha of the time over the whole family and every look
(Holm on p_zero); a claim of a size (beyond, within, no effect) likewise (Holm on p_beyond and on p_inside). The
interval shown (`ci`) is the one the state's first claim was read from (beyond, else the direction, else the size;
the family's widest level when undecided); a direction whose size is not settled or within the threshold also gets
the interval its size was read at (`ci_size`), since each claim has its own level.

A study may declare one **primary** comparison (`Rule.primary`): it is judged alone at alpha, and the others form
the secondary family, corrected among themselves.

Every verdict word, in the files and on the console, comes from `verdict_word` / `verdict_text` (the state and its
interval: `state_text`).

Either way no verdict is given (grey, the reason in `withheld`) to a comparison with fewer than `MIN_SEEDS` seeds or
to one its caller withholds (a target learned neither alone nor with its partner).
"""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mtbio.registry import Registry, validate_options
from mtbio.reporting.spending import look_weights

IMPROVES, HURTS, NO_EFFECT = "improves", "hurts", "no effect"
NO_VERDICT, UNDECIDED_WORD = "no verdict", "undecided"
HIGHER_BEYOND, LOWER_BEYOND = "higher by more than the threshold", "lower by more than the threshold"
HIGHER_UNSETTLED, LOWER_UNSETTLED = "higher, size not settled", "lower, size not settled"
HIGHER_WITHIN, LOWER_WITHIN = "higher, within the threshold", "lower, within the threshold"
NO_EFFECT_BEYOND = "no effect beyond the threshold"
GREEN, RED, GREY = "#2e7d32", "#c62828", "#9e9e9e"
COLOURS = {IMPROVES: GREEN, HURTS: RED, NO_EFFECT: GREY}
MIN_SEEDS = 3
CORRECTIONS = ("holm", "bh", "none")
DECIDED, UNDECIDED, WITHHELD = "decided", "undecided", "withheld"
V1_MIN_DELTA = 0.01

Scores = Mapping[int, float]  # seed -> primary score


@dataclass(frozen=True)
class Rule:
    """The decision rule a family is judged by: its version and options. `looks` is an adaptive design's first
    and last seed count (None: a fixed number of seeds, one look)."""

    version: str = "v2"
    alpha: float = 0.05
    min_delta: float | None = None  # None: each metric's registered threshold (v1: 0.01)
    correction: str = "holm"
    spending: str = "obrien-fleming"
    looks: tuple[int, int] | None = None
    primary: str | None = None  # the one comparison judged alone at alpha; the rest are the secondary family

    def threshold(self, metric: str | None) -> float:
        """The smallest |Δ| that counts as an effect for a comparison scored by `metric` (None: a 0–1 score)."""
        if self.min_delta is not None:
            return self.min_delta
        if self.version == "v1" or metric is None:
            return V1_MIN_DELTA
        from mtbio.evaluation.metrics import metric_min_delta

        return metric_min_delta(metric)

    def describe(self) -> dict[str, Any]:
        """The rule as the files record it: options and a sentence."""
        return {**asdict(self), "looks": list(self.looks) if self.looks else None, "text": RULES.get(self.version).text}

    def fields(self) -> dict[str, Any]:
        """The keys a study's file carries on the rule that judged it."""
        return {"alpha": self.alpha, "min_delta": self.min_delta, "rule": RULES.get(self.version).text,
                "decision_rule": self.describe()}


class RuleOptions(BaseModel):
    """A rule version's options (`--rule '{name: v2, alpha: 0.01}'`; the flags --alpha, --min-delta, --spending and
    --correction are shorthands for them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(0.05, gt=0, lt=1, description="the family-wise significance level")
    min_delta: float | None = Field(None, ge=0, description="the smallest |mean Δ| that counts as an effect (None: "
                                    "each metric's registered threshold)")
    spending: Literal["obrien-fleming", "pocock"] = Field(
        "obrien-fleming", description="the alpha-spending function that shares the level over adaptive looks")
    correction: Literal["holm", "bh", "none"] = Field("holm", description="multiplicity control across a family")


@dataclass(frozen=True)
class RuleVersion:
    """A registered version of the rule: how it judges a family, the sentence files quote, and its options model."""

    judge: Callable[[dict[str, dict[str, Any]], list[str], Rule], None]
    text: str
    counts_withheld: bool = False  # v1 counted withheld comparisons in the family's m (kept to reproduce its files)
    options: type[RuleOptions] = RuleOptions


RULES: Registry[RuleVersion] = Registry("decision rule")


def rule_options(name: str, values: Mapping[str, Any]) -> RuleOptions:
    """Rule version `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(RULES.get(name).options, values, f"rule '{name}'")


@dataclass
class Evidence:
    """Mean and spread of the per-seed differences, and the (v1, uncorrected) verdict."""

    mean: float
    sd: float | None
    p_value: float | None
    verdict: str
    n: int
    ci: tuple[float, float] | None = None


def _sd(values: list[float]) -> float:
    """The sample sd (n − 1), in floating point (statistics.stdev's exact arithmetic is slow in simulations)."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def t_interval(deltas: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t confidence interval for the mean of `deltas` (None for fewer than 2 values)."""
    if len(deltas) < 2:
        return None
    low, high = _interval_at(deltas, level)
    return low, high


def two_sided_p(deltas: list[float]) -> float | None:
    """The two-sided one-sample t-test p of the mean against 0 (None for one value; 0 or 1 without spread)."""
    if len(deltas) < 2:
        return None
    n, mean, sd = len(deltas), statistics.fmean(deltas), _sd(deltas)
    if sd == 0:
        return 0.0 if mean != 0 else 1.0
    from scipy.special import stdtr

    return float(min(1.0, 2 * stdtr(n - 1, -abs(mean) / (sd / math.sqrt(n)))))


def judge(deltas: list[float], alpha: float, min_delta: float) -> Evidence:
    """One test, uncorrected, by v1's rule (a single seed: the threshold alone)."""
    if not deltas:
        raise ValueError("no per-seed differences to judge")
    n, mean = len(deltas), statistics.fmean(deltas)
    if abs(mean) < 1e-12:  # float round-off of identical scores
        mean = 0.0
    sd = _sd(deltas) if n >= 2 else None
    p_value = two_sided_p(deltas)
    return Evidence(mean, sd, p_value, verdict_of(mean, p_value, alpha, min_delta), n, t_interval(deltas, 1 - alpha))


def verdict_of(mean: float, p_value: float | None, alpha: float, min_delta: float) -> str:
    """v1: improves / hurts / no effect from a mean Δ and its (adjusted) p."""
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


def _divisors(p_values: list[float], method: str) -> list[float]:
    """Per p, the factor its level is divided by under `method` (Holm: m − rank; BH: m / (rank + 1); none: 1)."""
    m, order = len(p_values), sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [1.0] * m
    for rank, i in enumerate(order):
        out[i] = {"holm": m - rank, "bh": m / (rank + 1), "none": 1.0}[method]
    return out


def verdict_word(cell: Mapping[str, Any]) -> str:
    """The word a judged cell's `verdict` holds in every file: "no verdict" (withheld or too few seeds),
    "undecided", else its decided state (v1/v2: improves / hurts / no effect; v3: one of its seven states)."""
    if cell.get("withheld") or cell.get("n_seeds", MIN_SEEDS) < MIN_SEEDS:
        return NO_VERDICT
    if cell.get("state") == UNDECIDED:
        return UNDECIDED_WORD
    return str(cell["verdict"])


def verdict_text(cell: Mapping[str, Any]) -> str:
    """A cell's verdict as every page and console line writes it: "no verdict (why)" for a cell withheld or with
    fewer than `MIN_SEEDS` seeds, "undecided" when its interval settles neither way, else its decided state;
    "(primary)" after a declared primary comparison's."""
    seeds = cell.get("n_seeds", MIN_SEEDS)
    if cell.get("withheld"):
        return f"no verdict ({cell['withheld']})"
    if seeds < MIN_SEEDS:
        return f"no verdict ({seeds} seed{'s' if seeds != 1 else ''}: a verdict needs at least {MIN_SEEDS})"
    if cell.get("verdict") is None:
        return "not judged (never corrected over a family)"
    return verdict_word(cell) + (" (primary)" if cell.get("primary") else "")


def state_text(cell: Mapping[str, Any], scale: float = 1.0) -> str:
    """The verdict with the interval it was read from, e.g. "lower, size not settled [-1.92, -0.10] at 99.8%"
    (`scale` 100: in points)."""
    text = verdict_text(cell)
    ci, size = cell.get("ci"), cell.get("ci_size")
    if ci is not None and not cell.get("withheld") and cell.get("verdict") is not None:
        text += f" [{scale * ci[0]:+.2f}, {scale * ci[1]:+.2f}] at {100 * cell.get('ci_level', 0.95):.3g}%"
        if size is not None:
            text += f" (its size: [{scale * size[0]:+.2f}, {scale * size[1]:+.2f}] at {100 * cell['ci_size_level']:.3g}%)"
    return text


def direction(cell: Mapping[str, Any]) -> int:
    """+1 when the cell's verdict claims a higher score, −1 a lower one, 0 when it claims no direction."""
    word = verdict_word(cell) if cell.get("verdict") is not None else ""
    if word in (IMPROVES, HIGHER_BEYOND, HIGHER_UNSETTLED, HIGHER_WITHIN):
        return 1
    return -1 if word in (HURTS, LOWER_BEYOND, LOWER_UNSETTLED, LOWER_WITHIN) else 0


def helps(cell: Mapping[str, Any]) -> bool:
    """Whether the verdict claims a gain that is not shown to be smaller than the threshold (improves; v3: higher
    by more than the threshold, or higher with its size not settled)."""
    return direction(cell) > 0 and verdict_word(cell) != HIGHER_WITHIN


def harms(cell: Mapping[str, Any]) -> bool:
    """Whether the verdict claims a loss that is not shown to be smaller than the threshold."""
    return direction(cell) < 0 and verdict_word(cell) != LOWER_WITHIN


def colour(cell: Mapping[str, Any]) -> str:
    """Green for a claimed gain, red for a claimed loss, grey otherwise (graphs and plots)."""
    return {1: GREEN, -1: RED}.get(direction(cell), GREY)


def correct(cells: Mapping[str, dict[str, Any]], rule: Rule) -> dict[str, Any]:
    """Judge every named cell (a `compare` result) as one family under `rule`: a cell with fewer than `MIN_SEEDS`
    seeds, or one whose `withheld` names a reason, gets no verdict; the others their adjusted p, verdict and state.
    Returns the family's description."""
    if rule.correction not in CORRECTIONS:
        raise ValueError(f"correction '{rule.correction}' is not one of {', '.join(CORRECTIONS)}")
    for cell in cells.values():
        seeds = cell.get("n_seeds", MIN_SEEDS)
        if seeds < MIN_SEEDS and not cell.get("withheld"):
            cell["withheld"] = f"{seeds} seed{'s' if seeds != 1 else ''}: a verdict needs at least {MIN_SEEDS}"
        cell["min_delta"] = rule.threshold(cell.get("metric"))
    version = RULES.get(rule.version)
    tested = [name for name, cell in cells.items()
              if cell["p_value"] is not None and (version.counts_withheld or not cell.get("withheld"))]
    primary = [rule.primary] if rule.primary in tested else []
    secondary = [name for name in tested if name not in primary]
    for family in (primary, secondary):
        if family:
            version.judge(dict(cells), family, rule)
    for name, cell in cells.items():
        cell.pop("primary", None)
        if cell.get("withheld"):
            cell.update(state=WITHHELD if cell.get("n_seeds", MIN_SEEDS) >= MIN_SEEDS else UNDECIDED)
        if name not in tested:
            cell.update(p_adjusted=None, state=cell.get("state") or UNDECIDED)
        cell["verdict"] = verdict_word({**cell, "verdict": cell.get("verdict") or NO_EFFECT})
    described = {"correction": rule.correction, "m": len(secondary), "tests": secondary, "rule": rule.version}
    if primary:
        cells[primary[0]]["primary"] = True
        described["primary"] = primary[0]
    elif rule.primary is not None and rule.primary not in cells:
        raise ValueError(f"the primary comparison '{rule.primary}' is not among the family's judged comparisons "
                         f"({', '.join(tested) or 'none'})")
    return described


def _judge_v1(cells: dict[str, dict[str, Any]], tested: list[str], rule: Rule) -> None:
    adjusted = adjust([cells[name]["p_value"] for name in tested], rule.correction)
    for name, p in zip(tested, adjusted):
        cell = cells[name]
        cell["p_adjusted"] = p
        cell["verdict"] = verdict_of(cell["delta"], p, rule.alpha, cell["min_delta"])
        ci = cell.get("ci")
        inside = ci is not None and -cell["min_delta"] < ci[0] and ci[1] < cell["min_delta"]
        cell["state"] = DECIDED if cell["verdict"] != NO_EFFECT or inside else UNDECIDED


RULES.register("v1")(RuleVersion(_judge_v1, (
    "v1: paired two-sided t-test over seeds against 0, p adjusted across the family: improves/hurts when adjusted "
    "p < alpha and |mean delta| >= min_delta, else no effect"), counts_withheld=True))


# ---- v2 -----------------------------------------------------------------------------------------------------------
def look_p_values(deltas: list[float], min_delta: float) -> tuple[np.ndarray, np.ndarray]:
    """For each prefix of `deltas` of 2 or more seeds (a look), the two-sided p_beyond and p_inside of v2 (module
    docstring): the smallest a at which the prefix's (1 − a) t interval lies wholly beyond ±min_delta, or wholly
    inside. Index k holds the look at k + 2 seeds."""
    from scipy.special import stdtr

    x = np.asarray(deltas, dtype=float)
    n = np.arange(2, len(x) + 1, dtype=float)
    mean = np.array([x[:k].mean() for k in range(2, len(x) + 1)])
    sd = np.array([x[:k].std(ddof=1) for k in range(2, len(x) + 1)])
    se = sd / np.sqrt(n)
    df = n - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = 2 * np.minimum(stdtr(df, -(mean - min_delta) / se), stdtr(df, -(-mean - min_delta) / se))
        inside = 2 * stdtr(df, -np.minimum(min_delta - mean, min_delta + mean) / se)
    flat = sd <= 1e-12 * np.maximum(1.0, np.abs(mean))  # no spread (up to round-off): the mean alone settles it
    beyond = np.where(flat, np.where(np.abs(mean) > min_delta, 0.0, 1.0), beyond)
    inside = np.where(flat, np.where(np.abs(mean) < min_delta, 0.0, 1.0), inside)
    return np.minimum(beyond, 1.0), np.minimum(inside, 1.0)


def _interval_at(deltas: list[float], level: float) -> list[float]:
    from scipy.special import stdtrit

    n, mean, sd = len(deltas), statistics.fmean(deltas), _sd(deltas)
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * sd / math.sqrt(n) if sd > 0 else 0.0
    return [mean - half, mean + half]


CALIBRATION_PATHS = 100_000


@functools.lru_cache(maxsize=32)
def null_minimum(first: int, last: int, spending: str, alpha: float) -> np.ndarray:
    """The sorted null sample of min over looks of (two-sided t-test p) / w for the adaptive design `first` …
    `last` seeds: zero-mean normal seed paths (the t statistics are pivotal, so the spread does not matter),
    `CALIBRATION_PATHS` of them from a fixed seed."""
    from scipy.special import stdtr

    weights = look_weights(first, last, spending, alpha)
    paths = np.random.default_rng(0).standard_normal((CALIBRATION_PATHS, last))
    sums, squares = np.cumsum(paths, axis=1), np.cumsum(paths * paths, axis=1)
    lowest = np.ones(CALIBRATION_PATHS)
    for n, w in weights.items():
        mean = sums[:, n - 1] / n
        se = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0.0) / (n - 1) / n)
        lowest = np.minimum(lowest, 2 * stdtr(n - 1, -np.abs(mean) / se) / w)
    return np.sort(lowest)


def sequential_p(deltas: list[float], min_delta: float, rule: Rule) -> dict[str, Any]:
    """A comparison's v2 p values before the family's correction. Per kind (beyond, inside): the minimum over the
    looks taken so far of p / w (each look's share w of alpha) and the seeds at that look; with more than one look,
    that minimum is calibrated by its null distribution over every look the design allows (`null_minimum`), the
    exact price of looking several times in place of a Bonferroni split. `limit(a)` is the largest p / w a
    comparison may have to pass at level a."""
    n = len(deltas)
    first, last = rule.looks if rule.looks else (n, n)
    last = max(last, n)
    weights = look_weights(first, last, rule.spending, rule.alpha)
    beyond, inside = look_p_values(deltas, min_delta)
    if len(weights) > 1:
        sample = null_minimum(first, last, rule.spending, rule.alpha)
        calibrate = lambda x: (1 + np.searchsorted(sample, x, side="right")) / (len(sample) + 1)  # noqa: E731
        limit = lambda a: float(sample[max(0, min(len(sample) - 1, int(a * (len(sample) + 1)) - 2))])  # noqa: E731
    else:
        calibrate, limit = (lambda x: x), (lambda a: a)
    out: dict[str, Any] = {"weights": weights, "limit": limit}
    for kind, values in (("beyond", beyond), ("inside", inside)):
        scaled = [(min(1.0, float(values[k - 2]) / weights[k]), k) for k in weights if 2 <= k <= n]
        lowest, look = min(scaled) if scaled else (1.0, n)
        out[kind] = (float(min(1.0, calibrate(lowest))), look)
    return out


def _judge_v2(cells: dict[str, dict[str, Any]], tested: list[str], rule: Rule) -> None:
    found = {}
    for name in tested:
        deltas = [cells[name]["per_seed"][s]["delta"] for s in sorted(cells[name]["per_seed"], key=int)]
        found[name] = (deltas, sequential_p(deltas, cells[name]["min_delta"], rule))
    levels: dict[str, dict[str, tuple[float, float]]] = {}
    for kind in ("beyond", "inside"):
        raw = [found[name][1][kind][0] for name in tested]
        for name, p, divisor in zip(tested, adjust(raw, rule.correction), _divisors(raw, rule.correction)):
            levels.setdefault(name, {})[kind] = (p, divisor)
    for name in tested:
        cell, (deltas, seq) = cells[name], found[name]
        (p_beyond, divisor_beyond), (p_inside, divisor_inside) = levels[name]["beyond"], levels[name]["inside"]
        cell.update(p_adjusted=p_beyond, p_adjusted_inside=p_inside, p_sided="two-sided")
        if p_beyond < rule.alpha:
            look, divisor, state = seq["beyond"][1], divisor_beyond, DECIDED
        elif p_inside < rule.alpha:
            look, divisor, state = seq["inside"][1], divisor_inside, DECIDED
        else:  # the family's widest level (Bonferroni's): an interval there is neither wholly beyond nor inside
            look, divisor, state = len(deltas), float(len(tested)) if rule.correction != "none" else 1.0, UNDECIDED
        level = 1 - seq["weights"][look] * seq["limit"](rule.alpha / divisor)
        cell["ci"], cell["ci_level"], cell["ci_seeds"] = _interval_at(deltas[:look], level), level, look
        mean = statistics.fmean(deltas[:look])
        cell["verdict"] = (IMPROVES if mean > 0 else HURTS) if p_beyond < rule.alpha else NO_EFFECT
        cell["state"] = state


RULES.register("v2")(RuleVersion(_judge_v2, (
    "v2: per comparison a two-sided t interval over seeds, its level split over the looks (alpha spending) and "
    "across the family (Holm); improves/hurts when the interval lies wholly beyond +/-min_delta, no effect when "
    "wholly inside, else undecided")))


def _judge_v3(cells: dict[str, dict[str, Any]], tested: list[str], rule: Rule) -> None:
    found = {}
    for name in tested:
        deltas = [cells[name]["per_seed"][s]["delta"] for s in sorted(cells[name]["per_seed"], key=int)]
        seq = sequential_p(deltas, cells[name]["min_delta"], rule)
        seq["zero"] = sequential_p(deltas, 0.0, rule)["beyond"]
        found[name] = (deltas, seq)
    levels: dict[str, dict[str, tuple[float, float]]] = {}
    for kind in ("zero", "beyond", "inside"):
        raw = [found[name][1][kind][0] for name in tested]
        for name, p, divisor in zip(tested, adjust(raw, rule.correction), _divisors(raw, rule.correction)):
            levels.setdefault(name, {})[kind] = (p, divisor)
    for name in tested:
        cell, (deltas, seq) = cells[name], found[name]
        passed = {kind: levels[name][kind][0] < rule.alpha for kind in ("zero", "beyond", "inside")}
        cell.update(p_adjusted=levels[name]["beyond"][0], p_adjusted_inside=levels[name]["inside"][0],
                    p_adjusted_zero=levels[name]["zero"][0], p_sided="two-sided")
        shown = "beyond" if passed["beyond"] else "zero" if passed["zero"] else "inside" if passed["inside"] else None
        if shown is None:  # the family's widest level (Bonferroni's): neither 0 nor ±min_delta settles it
            look, divisor = len(deltas), float(len(tested)) if rule.correction != "none" else 1.0
        else:
            look, divisor = seq[shown][1], levels[name][shown][1]
        level = 1 - seq["weights"][look] * seq["limit"](rule.alpha / divisor)
        cell["ci"], cell["ci_level"], cell["ci_seeds"] = _interval_at(deltas[:look], level), level, look
        higher = statistics.fmean(deltas[:look]) > 0
        if passed["beyond"]:
            verdict = HIGHER_BEYOND if higher else LOWER_BEYOND
        elif passed["zero"] and passed["inside"]:
            verdict = HIGHER_WITHIN if higher else LOWER_WITHIN
        elif passed["zero"]:
            verdict = HIGHER_UNSETTLED if higher else LOWER_UNSETTLED
        else:
            verdict = NO_EFFECT_BEYOND if passed["inside"] else UNDECIDED_WORD
        cell["verdict"], cell["state"] = verdict, UNDECIDED if verdict == UNDECIDED_WORD else DECIDED
        if shown == "zero":  # the size was read at its own level: the interval there, beside the direction's
            size = "inside" if passed["inside"] else "beyond"
            look, divisor = seq[size][1], levels[name][size][1]
            level = 1 - seq["weights"][look] * seq["limit"](rule.alpha / divisor)
            cell["ci_size"], cell["ci_size_level"] = _interval_at(deltas[:look], level), level


RULES.register("v3")(RuleVersion(_judge_v3, (
    "v3: per comparison a two-sided t interval over seeds, its level split over the looks (alpha spending) and "
    "across the family (Holm) for each claim; higher/lower when it excludes 0, by more than the threshold when it "
    "lies wholly beyond +/-min_delta, within the threshold when wholly inside; no effect beyond the threshold when "
    "it includes 0 and lies inside; else undecided")))


# ---- one comparison -----------------------------------------------------------------------------------------------
def summary(scores: Scores) -> dict[str, Any]:
    """Mean, sd (None for one seed) and the per-seed values of a score."""
    values = list(scores.values())
    return {"mean": statistics.fmean(values), "sd": _sd(values) if len(values) > 1 else None,
            "per_seed": {str(s): v for s, v in sorted(scores.items())}}


def compare(with_scores: Scores, alone: Scores, metric: str | None = None) -> dict[str, Any]:
    """Δ per seed (seeds present in both, higher is better by `metric`'s direction; None: already signed), its mean,
    sd, 95% interval and two-sided p against 0; judged only by `correct`."""
    from mtbio.evaluation.metrics import metric_sign

    sign = metric_sign(metric) if metric else 1.0
    seeds = sorted(set(with_scores) & set(alone))
    deltas = [sign * (with_scores[s] - alone[s]) for s in seeds]
    if not deltas:
        raise ValueError("no per-seed differences to judge")
    mean = statistics.fmean(deltas)
    ci = t_interval(deltas, 0.95)
    return {"delta": 0.0 if abs(mean) < 1e-12 else mean, "sd": _sd(deltas) if len(deltas) > 1 else None,
            "ci": None if ci is None else list(ci), "ci_level": 0.95, "p_value": two_sided_p(deltas),
            "p_sided": "two-sided", "verdict": None, "n_seeds": len(deltas), "metric": metric,
            "score": summary({s: with_scores[s] for s in seeds}),
            "per_seed": {str(s): {"with": with_scores[s], "alone": alone[s], "delta": d} for s, d in zip(seeds, deltas)}}


JUDGED = ("p_adjusted", "p_adjusted_inside", "p_adjusted_zero", "primary", "ci_size", "ci_size_level", "state", "verdict", "withheld", "ci", "ci_level", "ci_seeds", "min_delta")


def recompare(cell: dict[str, Any], metric: str | None) -> dict[str, Any]:
    """A saved comparison (Δ of a `metric` score; None: already signed) measured again from its per-seed scores, its
    `withheld` reason kept (the same seeds give the same one), ready for `correct` under another rule: how
    `mtbio report --rule` re-judges committed files without training."""
    per_seed = cell["per_seed"]
    fresh = compare({int(s): v["with"] for s, v in per_seed.items()}, {int(s): v["alone"] for s, v in per_seed.items()},
                    metric)
    if cell.get("withheld"):
        fresh["withheld"] = cell["withheld"]
    return {**{k: v for k, v in cell.items() if k not in fresh and k not in JUDGED}, **fresh}


# ---- the rule's error, simulated ----------------------------------------------------------------------------------
def simulate_sequential(sd: float, max_seeds: int, rule: Rule = Rule(), start: int = 3, edges: int = 12,
                        runs: int = 500, seed: int = 0, true_delta: float = 0.0,
                        true_edges: int = 0) -> dict[str, float]:
    """The seed design on a graph of `edges` independent edges, per-seed Δ ~ Normal(0, sd) except `true_edges` of
    them with mean `true_delta`, each undecided edge given one more seed per round up to `max_seeds` (`start` =
    `max_seeds`: the fixed design), judged after every round by `rule` (its `looks` set from start and max_seeds).
    Over `runs` graphs: on the null edges, the share ending green, red, decided "no effect" and undecided, and the
    family-wise error (the share of graphs with any green or red null edge); on the true edges, the share ending
    green (power); and the mean seeds per edge."""
    rng = np.random.default_rng(seed)
    rule = Rule(**{**asdict(rule), "looks": (start, max_seeds) if start < max_seeds else None})
    means = [true_delta] * true_edges + [0.0] * (edges - true_edges)
    ends = {IMPROVES: 0, HURTS: 0, NO_EFFECT: 0, UNDECIDED: 0}
    seeds_used = graphs_wrong = found = 0
    for _ in range(runs):
        deltas = [list(rng.normal(mu, sd, start)) for mu in means]
        while True:
            cells = {str(i): compare(dict(enumerate(values)), {k: 0.0 for k in range(len(values))})
                     for i, values in enumerate(deltas)}
            correct(cells, rule)
            grow = [i for i, values in enumerate(deltas)
                    if cells[str(i)]["state"] == UNDECIDED and len(values) < max_seeds]
            if not grow:
                break
            for i in grow:
                deltas[i].append(float(rng.normal(means[i], sd)))
        null = [cells[str(i)] for i in range(true_edges, edges)]
        for cell in null:
            ends[{1: IMPROVES, -1: HURTS}.get(direction(cell), NO_EFFECT) if cell["state"] == DECIDED
                 else UNDECIDED] += 1
        seeds_used += sum(len(values) for values in deltas)
        graphs_wrong += any(direction(cell) != 0 for cell in null)
        found += sum(helps(cells[str(i)]) for i in range(true_edges))
    total = runs * (edges - true_edges)
    return {"false_green": ends[IMPROVES] / total, "false_red": ends[HURTS] / total,
            "no_effect": ends[NO_EFFECT] / total, "undecided": ends[UNDECIDED] / total,
            "mean_seeds": seeds_used / (runs * edges), "family_wise_error": graphs_wrong / runs,
            "power": found / (runs * true_edges) if true_edges else None}
