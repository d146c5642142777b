"""The head of the `span_extraction` kind (`mtbio.kinds.span_extraction`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads import HeadConfig, LinearHead


class SpanHead(LinearHead):
    """Every token → dropout → linear → (start, end) logits; a span starts and ends at tokens whose `offset_start`
    is not `outside` (the context's) and is at most `max_tokens` long."""

    def __init__(self, config: HeadConfig, outside: int, max_tokens: int):
        super().__init__(config)
        self.outside, self.max_tokens = outside, max_tokens

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return self.classify(hidden)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        labels = labels.to(logits.device)
        return (nn.functional.cross_entropy(logits[..., 0].float(), labels[:, 0])
                + nn.functional.cross_entropy(logits[..., 1].float(), labels[:, 1])) / 2

    def _best(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[tuple[int, int, float]]:
        """Per row (first token, last token, probability) of the best span inside the context."""
        outside = batch["offset_start"].to(logits.device) == self.outside
        start = logits[..., 0].float().masked_fill(outside, float("-inf")).log_softmax(-1)
        end = logits[..., 1].float().masked_fill(outside, float("-inf")).log_softmax(-1)
        width = self.max_tokens  # [row, first, k]: the end at token first + k, one band instead of every pair
        ends = nn.functional.pad(end, (0, width - 1), value=float("-inf")).unfold(1, width, 1)
        best = (start[:, :, None] + ends).flatten(1).max(-1)
        return [(i // width, i // width + i % width, float(p.exp())) for i, p in zip(best.indices.tolist(), best.values)]

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        starts, ends = batch["offset_start"].tolist(), batch["offset_end"].tolist()
        return [[starts[row][first], ends[row][last]] for row, (first, last, _) in enumerate(self._best(logits, batch))]

    def scores(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        """The probability of the decoded span (its start's times its end's)."""
        return [p for _, _, p in self._best(logits, batch)]
