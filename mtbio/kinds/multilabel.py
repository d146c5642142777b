"""Multi-label classification (HoC): [CLS] → dropout → linear, one sigmoid per label, BCE; positive above the
task's `threshold`.

Labels are multi-hot floats over the label list (NaN for an unlabelled example, so it can never pass for "no
label applies"); the trivial predictor gives every example the label set each label gets by majority vote
over the training examples (usually empty); exported as `AutoModelForSequenceClassification`.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import torch
from datasets import List, Value
from torch import nn

from mtbio.data.example import Example
from mtbio.data.featurize import label_index, lookup, text_columns
from mtbio.errors import MtbioError
from mtbio.model.heads import HeadConfig, SentenceHead
from mtbio.tasks.kinds import ExportSpec, TaskKind, register_kind
from mtbio.tasks.schema import TaskDef


class MultiLabelHead(SentenceHead):
    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float())

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        labels = self.config.labels
        positive = torch.sigmoid(logits.float()) > self.config.threshold
        return [[labels[j] for j in row.nonzero().flatten().tolist()] for row in positive]

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Sigmoid probability of every label (a label is predicted above the task's threshold)."""
        labels = self.config.labels
        return [dict(zip(labels, row)) for row in torch.sigmoid(logits.float()).tolist()]


@register_kind
class MultiLabel(TaskKind):
    name = "multilabel"
    label_form = "classes"
    default_metric = "multilabel_micro_f1"
    export = ExportSpec("AutoModelForSequenceClassification", "text-classification", "multi_label_classification")

    def features(self, tokenizer: Any) -> dict[str, Any]:
        return {"labels": List(Value("float32"))}

    def featurize(self, chunk: Sequence[Example], task: TaskDef, tokenizer: Any, max_length: int) -> dict[str, list[Any]]:
        columns, _ = text_columns(chunk, task, tokenizer, max_length)
        index = label_index(task)
        labels = []
        for ex in chunk:
            hot = [float("nan") if ex.label is None else 0.0] * len(index)
            for name in [] if ex.label is None else ex.label if isinstance(ex.label, list) else [ex.label]:
                hot[lookup(index, name, ex, task)] = 1.0
            labels.append(hot)
        columns["labels"] = labels
        return columns

    def head(self, config: HeadConfig) -> MultiLabelHead:
        return MultiLabelHead(config)

    def trivial_predictions(self, task: TaskDef, train: Sequence[Example], scored: Sequence[Example]) -> list[Any]:
        labels = [ex.label for ex in train if ex.label is not None]
        if not labels:
            raise MtbioError(f"task '{task.name}': no labelled training examples to fit a trivial predictor on")
        counts = Counter(name for label in labels for name in (label if isinstance(label, list) else [label]))
        majority = [name for name in task.label_list if counts[name] * 2 > len(labels)]
        return [list(majority) for _ in scored]
