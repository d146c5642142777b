"""The head of the `bi_encoder` kind (`mtbio.kinds.bi_encoder`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads import Head, HeadConfig, output_layer
from mtbio.model.windows import WINDOW, pool_segments


def pooled_pair(hidden: torch.Tensor, batch: dict[str, torch.Tensor] | None, pooling: str,
                task: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Each pair's two texts, the row's two segments (`mtbio.data.featurize.separate_text_columns`), pooled on their
    own: two [rows, hidden] float32 tensors."""
    if batch is None or WINDOW not in batch:
        raise ValueError(f"task '{task}': the batch does not hold each text of its pairs as a segment of its own")
    pooled, _ = pool_segments(hidden, batch["attention_mask"], pooling, int(batch[WINDOW][0]))
    return pooled[:, 0], pooled[:, 1]


def separate_cosine(hidden: torch.Tensor, batch: dict[str, torch.Tensor] | None, pooling: str, task: str) -> torch.Tensor:
    """The cosine of each pair's two texts, each encoded on its own and pooled (float32, one per row)."""
    return nn.functional.cosine_similarity(*pooled_pair(hidden, batch, pooling, task), dim=-1)


class CosineHead(Head):
    """cos(pool(text), pool(text_b)), each text encoded on its own; no weights."""

    def __init__(self, config: HeadConfig, label_range: tuple[float, float], pooling: str):
        super().__init__(config)
        self.low, self.high = label_range
        self.pooling = pooling

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        return separate_cosine(hidden, batch, self.pooling, self.config.task)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(logits.float(), (labels.float() - self.low) / (self.high - self.low))

    def decode(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> list[Any]:
        return [self.low + float(c) * (self.high - self.low) for c in logits.float().tolist()]


class CosineFeatureHead(Head):
    """What a head on the one feature cos(pool(text), pool(text_b)) shares: a linear layer from it to the outputs,
    no dropout; listed before the head it specializes (`class H(CosineFeatureHead, ClassificationHead)`)."""

    def __init__(self, config: HeadConfig, pooling: str):
        super().__init__(config)
        self.pooling = pooling
        self.dropout = nn.Identity()  # one feature: dropping it would drop the whole input
        self.out = output_layer(HeadConfig(**{**config.to_json(), "hidden_size": 1}))

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        cosine = separate_cosine(hidden, batch, self.pooling, self.config.task).unsqueeze(-1)
        return self.out(cosine.to(self.out.weight.dtype))
