"""Regression (sentence similarity): [CLS] → dropout → linear → a real score, trained with MSE.

Labels are floats; the trivial predictor is the mean training value (a constant: Pearson and Spearman 0,
mse the variance); exported as `AutoModelForSequenceClassification` with one output.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from mtbio.data.example import Example
from mtbio.data.featurize import text_columns
from mtbio.errors import MtbioError
from mtbio.model.probes import NumberProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import NUMBER

if TYPE_CHECKING:
    from mtbio.kinds.heads.regression import RegressionHead
    from mtbio.model.heads import HeadConfig


@register_kind
class Regression(TaskKind):
    name = "regression"
    pair_form = "cross"  # a pair is encoded together
    labels = NUMBER
    probe = NumberProbe()
    min_labels = 0
    default_metric = "pearson"
    export = ExportSpec("AutoModelForSequenceClassification", "text-classification", "regression")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        from datasets import Value

        return {"labels": Value("float32")}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, _ = text_columns(chunk, task, tokenizer, max_length)
        columns["labels"] = number_labels(chunk)
        return columns

    def head(self, config: HeadConfig) -> RegressionHead:
        from mtbio.kinds.heads.regression import RegressionHead

        return RegressionHead(config)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> float:
        return number_label(raw, task)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [mean_label(task, train)] * len(scored)


def number_labels(chunk: Sequence[Example]) -> list[float]:
    """The featurized labels of score examples: NaN where an example has none."""
    return [float("nan") if ex.label is None else float(ex.label) for ex in chunk]  # type: ignore[arg-type]


def number_label(raw: Any, task: TaskDef) -> float:
    """A score label: a finite number."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"a {task.type} label must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"a {task.type} label must be finite, got {raw!r}")
    return value


def mean_label(task: TaskDef, train: Sequence[Example]) -> float:
    """The mean training label: the constant a regression's trivial predictor predicts."""
    values = [float(ex.label) for ex in train if ex.label is not None]  # type: ignore[arg-type]
    if not values:
        raise MtbioError(f"task '{task.name}': no labelled training examples to fit a trivial predictor on")
    return float(np.mean(values))
