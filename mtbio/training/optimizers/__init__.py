"""The optimizers, one module each; importing this package registers them all in `OPTIMIZERS` (every module here is
imported, so a new optimizer is one file that registers itself):

- `adamw` (default; fused where the device has the kernel), `adamax` (MT-DNN's and MT-BERT's choice),
- `adafactor` (transformers' Adafactor at the run's learning rate and schedule: factored second moments, less state).

A factory takes the parameter groups (each with its `weight_decay`, `mtbio.training.optim.parameter_groups`), the
peak learning rate and its own options (the fields of the options model it registers with), and returns a
`torch.optim.Optimizer`; the schedule (`build_scheduler`) drives its `lr`. It may register a `lookahead` too: the
part of its next update of one parameter that a gradient contributes, which the affinity probe measures with
(`Lookahead`; an optimizer without one refuses `mtbio affinity`'s lookahead). A run sets the options with a mapping,
`optimizer: {name: adamw, betas: [0.9, 0.98], eps: 1.0e-6}` in a `--config` file or a recipe.
"""
from __future__ import annotations

from typing import Annotated, Any, Callable, Mapping

import torch
from pydantic import BaseModel, ConfigDict, Field

from mtbio.registry import Registry, import_modules, validate_options

OptimizerFactory = Callable[..., torch.optim.Optimizer]
# lookahead(optimizer, group, grad, state) -> the update `grad` adds to one parameter (state is only read)
Lookahead = Callable[[torch.optim.Optimizer, dict[str, Any], torch.Tensor, dict[str, Any]], torch.Tensor]
LOOKAHEAD_ATTR = "mtbio_lookahead"  # set on each optimizer `build_optimizer` makes: its registration's lookahead
OPTIMIZERS: Registry[OptimizerFactory] = Registry("optimizer")
# a moment's decay rate, for the options model of any Adam-like optimizer: checked when the run's options are read
Beta = Annotated[float, Field(ge=0, lt=1)]


class OptimizerOptions(BaseModel):
    """An optimizer's options (none by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def register_optimizer(name: str, *, options: type[OptimizerOptions] = OptimizerOptions,
                       lookahead: Lookahead | None = None) -> Callable[[OptimizerFactory], OptimizerFactory]:
    """Register `factory(groups, lr, **options) -> Optimizer` as `--optimizer NAME`, with its options model and its
    `lookahead` (None: the affinity probe cannot measure with it)."""

    def decorator(factory: OptimizerFactory) -> OptimizerFactory:
        factory.options_model = options  # type: ignore[attr-defined]
        factory.lookahead = lookahead  # type: ignore[attr-defined]
        return OPTIMIZERS.register(name)(factory)

    return decorator


def optimizer_options(name: str, values: Mapping[str, Any]) -> OptimizerOptions:
    """Optimizer `name`'s options model filled from `values`; ValueError naming what does not fit."""
    model = getattr(OPTIMIZERS.get(name), "options_model", OptimizerOptions)
    return validate_options(model, values, f"optimizer '{name}'")


import_modules(__name__, __path__)

__all__ = ["Beta", "LOOKAHEAD_ATTR", "Lookahead", "OPTIMIZERS", "OptimizerFactory", "OptimizerOptions",
           "optimizer_options", "register_optimizer"]
