"""Adafactor (Shazeer and Stern 2018) from transformers, at the run's learning rate and schedule: no relative step
size or parameter scaling of its own, so `--lr` and the warm-up/decay mean what they mean for AdamW. Its factored
second moments keep O(rows + columns) state per matrix instead of AdamW's two full copies."""
from __future__ import annotations

import torch

from mtbio.training.optimizers import register_optimizer


@register_optimizer("adafactor")
def adafactor(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    from transformers.optimization import Adafactor

    return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False, warmup_init=False)
