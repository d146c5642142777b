"""AdamW (β 0.9, 0.999, ε 1e-8 unless its options say otherwise): one fused kernel for all parameters where the
device and dtype have it; `bias_correction: false` is the original BERT's AdamW, without Adam's bias correction."""
from __future__ import annotations

import torch
from pydantic import Field

from mtbio.training.optimizers import Beta, OptimizerOptions, register_optimizer
from mtbio.training.stabilize import AdamWNoBiasCorrection


class AdamWOptions(OptimizerOptions):
    betas: tuple[Beta, Beta] = Field((0.9, 0.999), description="the moments' decay rates, each in [0, 1)")
    eps: float = Field(1e-8, gt=0, description="added to the second moment's square root")
    bias_correction: bool = Field(True, description="false: without Adam's bias correction (the original BERT's)")


@register_optimizer("adamw", options=AdamWOptions)
def adamw(groups: list[dict], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          bias_correction: bool = True) -> torch.optim.Optimizer:
    if not bias_correction:
        return AdamWNoBiasCorrection(groups, lr=lr, betas=betas, eps=eps)
    try:  # the same update as the loop version
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):  # parameters on a device or dtype without a fused kernel
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
