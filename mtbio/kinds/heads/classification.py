"""The head of the `classification` kind (`mtbio.kinds.classification`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads import SentenceHead


class ClassificationHead(SentenceHead):
    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.float(), labels)

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        labels = self.config.labels
        return [labels[i] for i in logits.argmax(-1).tolist()]

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """Softmax probability of every label."""
        labels = self.config.labels
        return [dict(zip(labels, row)) for row in torch.softmax(logits.float(), -1).tolist()]
