"""Adamax (MT-DNN's and MT-BERT's optimizer), torch's defaults otherwise."""
from __future__ import annotations

import torch

from mtbio.training.optimizers import register_optimizer


@register_optimizer("adamax")
def adamax(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adamax(groups, lr=lr)
