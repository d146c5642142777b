"""Adafactor (Shazeer and Stern 2018) from transformers, at the run's learning rate and schedule: no relative step
size or parameter scaling of its own, so `--lr` and the warm-up/decay mean what they mean for AdamW. Its factored
second moments keep O(rows + columns) state per matrix instead of AdamW's two full copies."""
from __future__ import annotations

from typing import Any

import torch

from mtbio.training.optimizers import register_optimizer


def adafactor_lookahead(optimizer: torch.optim.Optimizer, group: dict[str, Any], grad: torch.Tensor,
                        state: dict[str, Any]) -> torch.Tensor:
    """Adafactor's update from `grad`: lr·grad/√v̂, v̂ its factored (a matrix: row and column means) or full second
    moment updated with grad² + ε1, the update's RMS clipped to `clip_threshold`; with β1, its (1 − β1) share.
    Weight decay is left out."""
    from transformers.optimization import Adafactor

    step = int(state.get("step", 0)) + 1
    lr = Adafactor._get_lr(group, {"step": step, "RMS": state.get("RMS", 0.0)})
    beta2 = 1.0 - step ** group["decay_rate"]
    squared = grad * grad + group["eps"][0]
    if grad.dim() >= 2:
        row = state.get("exp_avg_sq_row", torch.zeros(grad.shape[:-1])).to(grad) * beta2 \
            + (1 - beta2) * squared.mean(dim=-1)
        col = state.get("exp_avg_sq_col", torch.zeros(grad.shape[:-2] + grad.shape[-1:])).to(grad) * beta2 \
            + (1 - beta2) * squared.mean(dim=-2)
        update = Adafactor._approx_sq_grad(row, col) * grad
    else:
        second = state.get("exp_avg_sq", torch.zeros_like(grad)).to(grad) * beta2 + (1 - beta2) * squared
        update = second.rsqrt() * grad
    update = update / (Adafactor._rms(update) / group["clip_threshold"]).clamp(min=1.0) * lr
    return update * (1 - group["beta1"]) if group["beta1"] is not None else update


@register_optimizer("adafactor", lookahead=adafactor_lookahead)
def adafactor(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    from transformers.optimization import Adafactor

    return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
