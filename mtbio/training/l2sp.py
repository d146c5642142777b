"""`--l2sp ALPHA`: refinement that stays near the encoder it started from (L2-SP, Li et al. 2018: a penalty
α/2·‖θ − θ₀‖² on the pretrained weights instead of weight decay toward zero).

Applied decoupled, as AdamW applies its weight decay: after every optimizer step each encoder weight
moves toward its starting value by its group's current learning rate times α, θ ← θ − lr·α·(θ − θ₀).
θ₀ is copied when the trainer is built, before a resumed run loads its checkpoint, so a resumed run
pulls toward the same weights. The heads are new and are not anchored.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mtbio.training.events import Flow, Listener


class AnchorToStart(Listener):
    """Pull the encoder's weights toward their values at construction after every optimizer step."""

    def __init__(self, encoder: nn.Module, alpha: float):
        self.alpha = alpha
        self.start = {id(p): p.detach().clone() for p in encoder.parameters() if p.requires_grad}

    @torch.no_grad()
    def on_step_end(self, trainer: Any, flow: Flow) -> None:
        for group in trainer.raw_optimizer.param_groups:
            rate = float(group["lr"]) * self.alpha
            for param in group["params"]:
                start = self.start.get(id(param))
                if start is not None:
                    param.sub_(param - start, alpha=rate)

    def distance(self, encoder: nn.Module) -> float:
        """‖θ − θ₀‖ over the anchored weights."""
        return float(sum(float((p.detach() - self.start[id(p)]).pow(2).sum()) for p in encoder.parameters()
                         if id(p) in self.start) ** 0.5)
