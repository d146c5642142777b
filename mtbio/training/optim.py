"""Optimizer and learning-rate schedule (seed 004 section 4.2: lr 5e-5, warm-up 0.1, linear decay,
weight decay 0.01 except biases and LayerNorm weights)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from functools import partial

import torch
from torch import nn

from mtbio.errors import MtbioError


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    """Biases and normalisation weights get no weight decay."""
    return name.endswith("bias") or param.ndim == 1 or "LayerNorm" in name or "layer_norm" in name


def parameter_groups(model: nn.Module, weight_decay: float, lr: float | None = None,
                     layer_decay: float | None = None) -> list[dict]:
    """Two groups: decayed matrices, and undecayed biases / normalisation weights (frozen ones left out).

    With `layer_decay` γ, one group per layer and decay kind at lr·γ^(L−l) (`mtbio.training.stabilize`).
    """
    if layer_decay is not None:
        from mtbio.training.stabilize import layerwise_parameter_groups

        if lr is None:
            raise MtbioError("layerwise learning-rate decay needs the base learning rate")
        return layerwise_parameter_groups(model, weight_decay, lr, layer_decay, is_no_decay)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if is_no_decay(name, param) else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def weighting_group(groups: list[dict], weighting: nn.Module, lr: float | None) -> list[dict]:
    """`groups` with the loss weighting's parameters (`mtbio.model.weighting`) moved into a group of
    their own: no weight decay, at `lr` when given (following the schedule like every group)."""
    own = [p for p in weighting.parameters() if p.requires_grad]
    if not own:
        return groups
    ids = {id(p) for p in own}
    rest = [{**g, "params": [p for p in g["params"] if id(p) not in ids]} for g in groups]
    return [g for g in rest if g["params"]] + [{"params": own, "weight_decay": 0.0, **({"lr": lr} if lr else {})}]


def build_optimizer(groups: Iterable[dict], name: str, lr: float,
                    options: Mapping[str, Any] | None = None) -> torch.optim.Optimizer:
    """The optimizer registered as `name` (`mtbio.training.optimizers`) with its `options`, carrying its
    registration's lookahead (`LOOKAHEAD_ATTR`)."""
    from mtbio.training.optimizers import LOOKAHEAD_ATTR, OPTIMIZERS, optimizer_options

    values = optimizer_options(name, options or {}).model_dump()
    factory = OPTIMIZERS.get(name)
    optimizer = factory(list(groups), lr, **values)
    setattr(optimizer, LOOKAHEAD_ATTR, getattr(factory, "lookahead", None))
    return optimizer


def build_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float,
                    name: str = "linear") -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule registered as `name` (`mtbio.training.schedules`; linear: transformers'
    `get_linear_schedule_with_warmup`, whose module costs every training process ~2 s of imports) over `total_steps`,
    warming up over `warmup_ratio` of them."""
    from mtbio.training.schedules import SCHEDULES

    warmup = int(round(total_steps * warmup_ratio))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, partial(SCHEDULES.get(name), warmup=warmup,
                                                                total=max(1, total_steps)))
