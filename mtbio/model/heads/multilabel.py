"""Multi-label classification (HoC): [CLS] → dropout → linear, one sigmoid per label, BCE; positive above a threshold."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads.base import HEADS, SentenceHead


@HEADS.register("multilabel")
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
