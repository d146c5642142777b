"""The optimizers, one module each; importing this package registers them all in `OPTIMIZERS` (every module here is
imported, so a new optimizer is one file that registers itself):

- `adamw` (default; fused where the device has the kernel), `adamax` (MT-DNN's and MT-BERT's choice),
- `adafactor` (transformers' Adafactor at the run's learning rate and schedule: factored second moments, less state).

A factory takes the parameter groups (each with its `weight_decay`, `mtbio.training.optim.parameter_groups`) and the
peak learning rate, and returns a `torch.optim.Optimizer`; the schedule (`build_scheduler`) drives its `lr`.
"""
from __future__ import annotations

from typing import Callable

import torch

from mtbio.registry import Registry, import_modules

OptimizerFactory = Callable[[list[dict], float], torch.optim.Optimizer]
OPTIMIZERS: Registry[OptimizerFactory] = Registry("optimizer")


def register_optimizer(name: str) -> Callable[[OptimizerFactory], OptimizerFactory]:
    """Register `factory(groups, lr) -> Optimizer` as `--optimizer NAME`."""
    return OPTIMIZERS.register(name)


import_modules(__name__, __path__)

__all__ = ["OPTIMIZERS", "OptimizerFactory", "register_optimizer"]
