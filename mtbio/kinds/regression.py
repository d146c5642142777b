"""Regression (sentence similarity): [CLS] → dropout → linear → a real score, trained with MSE.

Labels are floats; the trivial predictor is the mean training value (a constant: Pearson and Spearman 0,
mse the variance); exported as `AutoModelForSequenceClassification` with one output.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import torch
from datasets import Value
from torch import nn

from mtbio.data.example import Example
from mtbio.data.featurize import text_columns
from mtbio.errors import MtbioError
from mtbio.model.heads import HeadConfig, SentenceHead
from mtbio.model.probes import NumberProbe
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef
from mtbio.tasks.shapes import NUMBER


class RegressionHead(SentenceHead):
    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return super().forward(hidden, pooled, batch).squeeze(-1)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(logits.float(), labels.float())

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        return [float(x) for x in logits.float().tolist()]


@register_kind
class Regression(TaskKind):
    name = "regression"
    labels = NUMBER
    probe = NumberProbe()
    min_labels = 0
    default_metric = "pearson"
    export = ExportSpec("AutoModelForSequenceClassification", "text-classification", "regression")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        return {"labels": Value("float32")}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, _ = text_columns(chunk, task, tokenizer, max_length)
        columns["labels"] = [float("nan") if ex.label is None else float(ex.label) for ex in chunk]  # type: ignore[arg-type]
        return columns

    def head(self, config: HeadConfig) -> RegressionHead:
        return RegressionHead(config)

    def check_label(self, raw: Any, example: Example, task: TaskDef, name: Callable[..., str]) -> float:
        return number_label(raw, task)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        return [mean_label(task, train)] * len(scored)


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
