"""The head of the `contrastive_pair` kind (`mtbio.kinds.contrastive_pair`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.kinds.heads.bi_encoder import pooled_pair
from mtbio.model.heads import Head, HeadConfig


class ContrastivePairHead(Head):
    """Every first text's cosine with every second text of the batch; multiple-negatives ranking over the positive
    pairs; no weights."""

    def __init__(self, config: HeadConfig, scale: float, pooling: str):
        super().__init__(config)
        self.scale = scale
        self.pooling = pooling

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """[rows, rows] float32 cosines: row i's first text against row j's second (the diagonal: each pair's own)."""
        first, second = pooled_pair(hidden, batch, self.pooling, self.config.task)
        return nn.functional.normalize(first, dim=-1) @ nn.functional.normalize(second, dim=-1).T

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of each positive pair's scaled cosines with the positive pairs' second texts, toward its own
        (0, with the graph kept, when the batch holds no positive pair)."""
        positive = labels == 1
        scores = logits[positive][:, positive] * self.scale
        if not len(scores):
            return logits.sum() * 0.0
        return nn.functional.cross_entropy(scores, torch.arange(len(scores), device=scores.device))

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        return logits.diagonal().tolist()
