"""Adamax (MT-DNN's and MT-BERT's optimizer), torch's defaults otherwise."""
from __future__ import annotations

from typing import Any

import torch

from mtbio.training.optimizers import register_optimizer


def adamax_lookahead(optimizer: torch.optim.Optimizer, group: dict[str, Any], grad: torch.Tensor,
                     state: dict[str, Any]) -> torch.Tensor:
    """Adam's share of `grad` over the infinity norm u = max(β2·u, |grad| + ε); momentum left out."""
    lr, eps = float(group["lr"]), float(group["eps"])
    beta1, beta2 = group["betas"]
    step = float(state["step"]) + 1 if "step" in state else 1.0
    scale = torch.maximum(state.get("exp_inf", torch.zeros_like(grad)) * beta2, grad.abs() + eps)
    return lr * (1 - beta1) / (1 - beta1 ** step) * grad / scale


@register_optimizer("adamax", lookahead=adamax_lookahead)
def adamax(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adamax(groups, lr=lr)
