"""AdamW (β 0.9, 0.999, ε 1e-8): one fused kernel for all parameters where the device and dtype have it."""
from __future__ import annotations

import torch

from mtbio.training.optimizers import register_optimizer


@register_optimizer("adamw")
def adamw(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    try:  # the same update as the loop version
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=True)
    except (RuntimeError, ValueError):  # parameters on a device or dtype without a fused kernel
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8)
