"""The score a task gives for free: what a model that learned nothing but the label prior predicts.

A trained score means something only beside this one. The trivial predictor is fitted on the
training labels and applied to every example of the split being scored:

- classification: the most frequent training label (the majority class);
- tagging: every word `O` (entity F1 0; token-level metrics are not 0);
- multilabel: the label set each label gets by majority vote over training examples (usually
  empty, since every label is rare);
- regression: the mean training value (a constant: Pearson/Spearman 0, mse the variance).

Beside it, `best_constant_scores` fits the same constant on the scored split itself (its majority
class, all `O`): a split whose majority differs from training's is scored by what a constant
guess really reaches there.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from mtbio.data.example import Example, Label
from mtbio.errors import MtbioError
from mtbio.evaluation.metrics import metric_sign, score_task
from mtbio.tasks.schema import TaskDef


def trivial_prediction(task: TaskDef, train: Sequence[Example]) -> str | float | list[str] | None:
    """The one label the trivial predictor gives every example (None for tagging: all `O`)."""
    labels = [ex.label for ex in train if ex.label is not None]
    if task.type == "tagging":
        return None
    if not labels:
        raise MtbioError(f"task '{task.name}': no labelled training examples to fit a trivial predictor on")
    if task.type == "classification":
        counts = Counter(str(label) for label in labels)
        return max(task.label_list, key=lambda name: (counts[name], -task.label_list.index(name)))
    if task.type == "multilabel":
        counts = Counter(name for label in labels for name in (label if isinstance(label, list) else [label]))
        return [name for name in task.label_list if counts[name] * 2 > len(labels)]
    return float(np.mean([float(label) for label in labels]))  # type: ignore[arg-type]


def trivial_scores(task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> dict[str, float]:
    """`score_task` of the trivial predictor (fitted on `train`) on the examples of `scored`."""
    constant = trivial_prediction(task, train)
    pred: list[Label]
    if task.type == "tagging":
        pred = [["O"] * len(ex.tokens or []) for ex in scored]
    else:
        pred = [constant for _ in scored]
    return score_task(task, [ex.label for ex in scored], pred, [ex.group for ex in scored])


def best_constant_scores(task: TaskDef, scored: Sequence[Example]) -> dict[str, float]:
    """`score_task` of the constant fitted on `scored` itself (its majority; all `O` for tagging)."""
    return trivial_scores(task, scored, scored)


NEAR_TRIVIAL = 0.01  # a score this close to the trivial one (or worse) is "not learned"


def trivial_score(task: TaskDef, train: Sequence[Example], scored: Sequence[Example], metric: str | None = None) -> float:
    """The trivial score of `metric` (default: the task's) on `scored`: the better of the training-majority
    constant and the best constant on `scored` itself."""
    metric = metric or task.metric
    both = [trivial_scores(task, train, scored)[metric], best_constant_scores(task, scored)[metric]]
    return min(both) if metric_sign(metric) < 0 else max(both)


def near_trivial(score: float, trivial: float, metric: str) -> bool:
    """Whether `score` is within NEAR_TRIVIAL of `trivial`, or below it (in the metric's direction)."""
    return metric_sign(metric) * (score - trivial) < NEAR_TRIVIAL
