"""Benchmark summaries over per-task primary scores, and mean ± sd over seeds."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Sequence

import numpy as np

from mtbio.errors import MtbioError

# BLURB's six task types (Gu et al., "Domain-Specific Language Model Pretraining for Biomedical
# NLP", section 4 and Table 3); `TaskDef.category` uses the same names.
BLURB_CATEGORIES = ("ner", "pico", "relation", "similarity", "document", "qa")


def blue_average(scores: Mapping[str, float]) -> float:
    """BLUE-style summary: the plain mean of the tasks' primary scores."""
    if not scores:
        raise MtbioError("no task scores to average")
    return float(np.mean(list(scores.values())))


def blurb_score(scores: Mapping[str, float], categories: Mapping[str, str]) -> float:
    """BLURB score: mean of the primary scores within each task category, then the mean of those.

    `categories` maps task name → category (`TaskDef.category`); every scored task must be in
    one of BLURB's six categories. Categories without a scored task are left out, so a partial
    task set gives a partial score (see `missing_tasks`).
    """
    if not scores:
        raise MtbioError("no task scores to aggregate")
    by_category: dict[str, list[float]] = defaultdict(list)
    for task, score in scores.items():
        category = categories.get(task)
        if category not in BLURB_CATEGORIES:
            raise MtbioError(f"task '{task}' has category {category!r}, not a BLURB category "
                             f"({', '.join(BLURB_CATEGORIES)})")
        by_category[category].append(score)
    return float(np.mean([np.mean(v) for v in by_category.values()]))


def missing_tasks(scored: Iterable[str], benchmark: Iterable[str]) -> list[str]:
    """Benchmark tasks (e.g. the `blurb` or `blue` domain's members) without a score, in benchmark order.

    An empty list means the summary covers the whole benchmark; otherwise label it "partial".
    """
    have = set(scored)
    return [t for t in dict.fromkeys(benchmark) if t not in have]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) over seeds; sd is 0.0 for a single value."""
    if len(values) == 0:
        raise MtbioError("no values to summarize")
    arr = np.asarray(values, dtype=float)
    sd = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return float(arr.mean()), sd


def benchmark_summaries(
    scores: Mapping[str, float], categories: Mapping[str, str], blue_tasks: Sequence[str], blurb_tasks: Sequence[str]
) -> dict[str, dict[str, object]]:
    """The summaries a column of task scores supports, each computed only over the tasks it is defined on.

    - `average`: the plain mean over every task given (the only summary of a mixed task set);
    - `blue`: the BLUE average over the BLUE tasks among them;
    - `blurb`: the BLURB score over the BLURB tasks among them.
    Each entry is {"value", "tasks" (used), "missing" (benchmark tasks without a score; non-empty
    means partial)}; a benchmark with none of its tasks in `scores` is left out.
    """
    out: dict[str, dict[str, object]] = {}
    if scores:
        out["average"] = {"value": blue_average(scores), "tasks": sorted(scores), "missing": []}
    for key, members in (("blue", blue_tasks), ("blurb", blurb_tasks)):
        chosen = {t: v for t, v in scores.items() if t in set(members)}
        if not chosen:
            continue
        value = blue_average(chosen) if key == "blue" else blurb_score(chosen, categories)
        out[key] = {"value": value, "tasks": sorted(chosen), "missing": missing_tasks(chosen, members)}
    return out
