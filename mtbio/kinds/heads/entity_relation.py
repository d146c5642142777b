"""The head of the `entity_relation` kind (`mtbio.kinds.entity_relation`), imported when a run builds one."""
from __future__ import annotations

import torch
from torch import nn

from mtbio.kinds.heads.classification import ClassificationHead
from mtbio.model.heads import HeadConfig
from mtbio.model.heads.base import INIT_STD


class EntityStartHead(ClassificationHead):
    """[first entity's start; second entity's start] → dropout → linear."""

    def __init__(self, config: HeadConfig):
        super().__init__(config)
        self.out = nn.Linear(2 * config.hidden_size, config.num_outputs)
        nn.init.normal_(self.out.weight, std=INIT_STD)
        nn.init.zeros_(self.out.bias)

    def forward(self, hidden: torch.Tensor, pooled: torch.Tensor | None = None,
                batch: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        if batch is None or "entity_positions" not in batch:
            raise ValueError(f"task '{self.config.task}': the batch has no entity_positions")
        positions = batch["entity_positions"].to(hidden.device)
        rows = torch.arange(hidden.shape[0], device=hidden.device)[:, None]
        return self.out(self.dropout(hidden[rows, positions].flatten(1)))
