"""The head of the `cosine_regression` kind (`mtbio.kinds.cosine_regression`), imported when a run builds one."""
from __future__ import annotations

import torch

from mtbio.kinds.heads.bi_encoder import CosineFeatureHead
from mtbio.kinds.heads.regression import RegressionHead
from mtbio.model.heads import HeadConfig


class CosineRegressionHead(CosineFeatureHead, RegressionHead):
    """cos(pool(text), pool(text_b)) → linear → a score."""

    def __init__(self, config: HeadConfig, pooling: str):
        super().__init__(config, pooling)
        with torch.no_grad():  # without LP-FT: the cosine itself, which ranks as the zero-shot baseline does
            self.out.weight.fill_(1.0)

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return super().forward(hidden, pooled, batch).squeeze(-1)
