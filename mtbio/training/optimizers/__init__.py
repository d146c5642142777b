"""The optimizers, one module each; importing this package registers them all in `OPTIMIZERS` (every module here is
imported, so a new optimizer is one file that registers itself):

- `adamw` (default; fused where the device has the kernel), `adamax` (MT-DNN's and MT-BERT's choice),
- `adafactor` (transformers' Adafactor at the run's learning rate and schedule: factored second moments, less state).

A factory takes the parameter groups (each with its `weight_decay`, `mtbio.training.optim.parameter_groups`) and the
peak learning rate, and returns a `torch.optim.Optimizer`; the schedule (`build_scheduler`) drives its `lr`.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import torch

from mtbio.registry import Registry

OptimizerFactory = Callable[[list[dict], float], torch.optim.Optimizer]
OPTIMIZERS: Registry[OptimizerFactory] = Registry("optimizer")


def register_optimizer(name: str) -> Callable[[OptimizerFactory], OptimizerFactory]:
    """Register `factory(groups, lr) -> Optimizer` as `--optimizer NAME`."""
    return OPTIMIZERS.register(name)


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["OPTIMIZERS", "OptimizerFactory", "register_optimizer"]
