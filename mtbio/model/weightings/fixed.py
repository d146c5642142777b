"""`fixed` (the default): each task's loss as it is, times its task definition's `loss_weight`."""
from __future__ import annotations

import torch

from mtbio.model.weighting import LossWeighting, register_weighting


@register_weighting("fixed")
class Fixed(LossWeighting):
    """The loss unchanged (its `loss_weight` is applied before): no parameters."""

    def forward(self, task: str, loss: torch.Tensor) -> torch.Tensor:
        return loss
