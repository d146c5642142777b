"""The head of the `regression` kind (`mtbio.kinds.regression`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads import SentenceHead


class RegressionHead(SentenceHead):
    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return super().forward(hidden, pooled, batch).squeeze(-1)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(logits.float(), labels.float())

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        return [float(x) for x in logits.float().tolist()]
