"""AdamW (β 0.9, 0.999, ε 1e-8 unless its options say otherwise): one fused kernel for all parameters where the
device and dtype have it; `bias_correction: false` is the original BERT's AdamW, without Adam's bias correction."""
from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

from mtbio.errors import MtbioError
from mtbio.training.optimizers import Beta, OptimizerOptions, register_optimizer
from mtbio.training.stabilize import AdamWNoBiasCorrection


class AdamWOptions(OptimizerOptions):
    betas: tuple[Beta, Beta] = Field((0.9, 0.999), description="the moments' decay rates, each in [0, 1)")
    eps: float = Field(1e-8, gt=0, description="added to the second moment's square root")
    bias_correction: bool = Field(True, description="false: without Adam's bias correction (the original BERT's)")


def adam_lookahead(optimizer: torch.optim.Optimizer, group: dict[str, Any], grad: torch.Tensor,
                   state: dict[str, Any]) -> torch.Tensor:
    """Adam's step is lr·m̂/(√v̂ + ε) with m = β1·m + (1 − β1)·grad, so `grad` adds lr·(1 − β1)/(1 − β1^k)·grad/(√v̂ + ε)
    (v̂ updated with `grad`; without bias correction, neither 1 − β^k). Momentum and weight decay are left out."""
    if group.get("amsgrad"):
        raise MtbioError("affinity: amsgrad is not supported")
    lr, eps = float(group["lr"]), float(group["eps"])
    beta1, beta2 = group["betas"]
    step = float(state["step"]) + 1 if "step" in state else 1.0
    second = state.get("exp_avg_sq", torch.zeros_like(grad)) * beta2 + (1 - beta2) * grad * grad
    if isinstance(optimizer, AdamWNoBiasCorrection):
        return lr * (1 - beta1) * grad / (second.sqrt() + eps)
    share = (1 - beta1) / (1 - beta1 ** step)
    return lr * share * grad / ((second / (1 - beta2 ** step)).sqrt() + eps)


@register_optimizer("adamw", options=AdamWOptions, lookahead=adam_lookahead)
def adamw(groups: list[dict], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          bias_correction: bool = True) -> torch.optim.Optimizer:
    if not bias_correction:
        return AdamWNoBiasCorrection(groups, lr=lr, betas=betas, eps=eps)
    try:  # the same update as the loop version
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):  # parameters on a device or dtype without a fused kernel
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
