"""The head of the `bi_encoder` kind (`mtbio.kinds.bi_encoder`), imported when a run builds one."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.model.heads import Head, HeadConfig, output_layer, pool


def separate_cosine(hidden: torch.Tensor, batch: dict[str, torch.Tensor] | None, pooling: str, task: str) -> torch.Tensor:
    """The cosine of each pair's two texts, each encoded on its own and pooled (float32, one per row)."""
    if batch is None or "hidden_b" not in batch:
        raise ValueError(f"task '{task}': the batch has no second text encoded on its own")
    first = pool(hidden, batch["attention_mask"], pooling).float()
    second = pool(batch["hidden_b"], batch["attention_mask_b"], pooling).float()
    return nn.functional.cosine_similarity(first, second, dim=-1)


class CosineHead(Head):
    """cos(pool(text), pool(text_b)), each text encoded on its own; no weights."""

    extra_texts = ("_b",)

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

    extra_texts = ("_b",)

    def __init__(self, config: HeadConfig, pooling: str):
        super().__init__(config)
        self.pooling = pooling
        self.dropout = nn.Identity()  # one feature: dropping it would drop the whole input
        self.out = output_layer(HeadConfig(**{**config.to_json(), "hidden_size": 1}))

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        cosine = separate_cosine(hidden, batch, self.pooling, self.config.task).unsqueeze(-1)
        return self.out(cosine.to(self.out.weight.dtype))
