"""The head of the `cosine_regression` kind (`mtbio.kinds.cosine_regression`), imported when a run builds one."""
from __future__ import annotations

import torch
from torch import nn

from mtbio.kinds.heads.bi_encoder import separate_cosine
from mtbio.kinds.heads.regression import RegressionHead
from mtbio.model.heads import HeadConfig, output_layer


class CosineRegressionHead(RegressionHead):
    """cos(pool(text), pool(text_b)) → linear → a score."""

    extra_texts = ("_b",)

    def __init__(self, config: HeadConfig, pooling: str):
        super().__init__(config)
        self.pooling = pooling
        self.dropout = nn.Identity()  # one feature: dropping it would drop the whole input
        self.out = output_layer(HeadConfig(**{**config.to_json(), "hidden_size": 1}))
        with torch.no_grad():  # without LP-FT: the cosine itself, which ranks as the zero-shot baseline does
            self.out.weight.fill_(1.0)

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        cosine = separate_cosine(hidden, batch, self.pooling, self.config.task).unsqueeze(-1)
        return self.out(cosine.to(self.out.weight.dtype)).squeeze(-1)
