"""`uncertainty`: homoscedastic-uncertainty loss weighting (Kendall, Gal & Cipolla, 2018, "Multi-Task
Learning Using Uncertainty to Weigh Losses for Scene Geometry and Semantics").

Each task t has a learned log-variance s_t = log σ_t², and its loss L_t becomes

    L_t · exp(−s_t) + s_t

the paper's form for classification losses (its eq. 10 with σ² for σ), used here for every task: the
regression form ½·exp(−s)·L + ½·s is this one halved, which only rescales the gradients. A task
whose loss stays large earns a large s_t and a small weight; the + s_t term keeps s_t from growing
without bound. The s_t are parameters of the model (`weighting.log_var`, one per task in the run's
order): the run's optimizer trains them (without weight decay, at `lr` when given), checkpoints save
and resume them, and results.json records their final values and the weights exp(−s_t).

YAML: `weighting: {name: uncertainty, init: 0.0, lr: 0.01}`; `--weighting uncertainty` takes the defaults.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from pydantic import Field
from torch import nn

from mtbio.model.weighting import LossWeighting, WeightingOptions, register_weighting


class UncertaintyOptions(WeightingOptions):
    init: float = Field(0.0, description="s_t at the start (0: every weight 1)")
    lr: float | None = Field(None, gt=0, description="learning rate of the s_t (default: the run's)")


@register_weighting("uncertainty", options=UncertaintyOptions)
class Uncertainty(LossWeighting):
    """L_t · exp(−s_t) + s_t with a learned s_t per task."""

    def __init__(self, tasks: Sequence[str], options: UncertaintyOptions) -> None:
        super().__init__(tasks, options)
        self.index = {task: i for i, task in enumerate(self.tasks)}
        self.log_var = nn.Parameter(torch.full((len(self.tasks),), float(options.init)))

    def forward(self, task: str, loss: torch.Tensor) -> torch.Tensor:
        s = self.log_var[self.index[task]]
        return loss * torch.exp(-s) + s

    def learning_rate(self) -> float | None:
        return self.options.lr

    def summary(self) -> dict[str, Any]:
        values = self.log_var.detach().float().cpu().tolist()
        return {"log_var": dict(zip(self.tasks, values)),
                "weight": {t: float(torch.exp(torch.tensor(-v))) for t, v in zip(self.tasks, values)}}
