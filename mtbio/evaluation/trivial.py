"""The score a task gives for free: what a model that learned nothing but the label prior predicts.

A trained score means something only beside this one. The trivial predictor belongs to the task's
kind (`mtbio.kinds`): fitted on the training labels, it gives every example of the split being
scored the same answer (the majority class; every word `O`; the labels a majority of training
examples carry; the mean training value).

Beside it, `best_constant_scores` fits the same constant on the scored split itself (its majority
class, all `O`): a split whose majority differs from training's is scored by what a constant
guess really reaches there.
"""
from __future__ import annotations

from typing import Sequence

from mtbio.data.example import Example
from mtbio.evaluation.metrics import metric_sign, score_task
from mtbio.tasks.schema import TaskDef


def trivial_scores(task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> dict[str, float]:
    """`score_task` of the trivial predictor (fitted on `train`; the task kind's) on the examples of `scored`."""
    pred = task.kind.trivial_predictions(task, train, scored)
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

