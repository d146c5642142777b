"""Loss weighting: how a task's batch loss is scaled before its backward pass (`--weighting NAME`).

A weighting method is an `nn.Module` inside `MultiTaskModel` (as `model.weighting`), so any
parameters it learns are trained by the run's optimizer, saved in its checkpoints and resumed;
the run's best weights (`encoder/`, `heads/`) do not include them (prediction needs none). Each
method is one module in `mtbio.model.weightings`, registered with a pydantic options model:

    class MyOptions(WeightingOptions):
        strength: float = 1.0

    @register_weighting("mine", options=MyOptions)
    class Mine(LossWeighting):
        def forward(self, task: str, loss: torch.Tensor) -> torch.Tensor: ...

`--weighting mine` or, in YAML, `weighting: {name: mine, strength: 2}` then selects it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from mtbio.registry import Registry, validate_options


class WeightingOptions(BaseModel):
    """A weighting method's options (none by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LossWeighting(nn.Module):
    """Scales each task's loss (already multiplied by its task definition's `loss_weight`)."""

    options_model: type[WeightingOptions] = WeightingOptions

    def __init__(self, tasks: Sequence[str], options: WeightingOptions) -> None:
        super().__init__()
        self.tasks = list(tasks)
        self.options = options

    def forward(self, task: str, loss: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def learning_rate(self) -> float | None:
        """The learning rate of this method's parameters (None: the run's)."""
        return None

    def summary(self) -> dict[str, Any]:
        """What the method learned, for results.json (nothing for a method without parameters)."""
        return {}


WEIGHTINGS: Registry[type[LossWeighting]] = Registry("loss weighting")


def register_weighting(name: str, *, options: type[WeightingOptions] = WeightingOptions
                       ) -> Callable[[type[LossWeighting]], type[LossWeighting]]:
    """Register a `LossWeighting` subclass as `name`, with its options model."""

    def decorator(cls: type[LossWeighting]) -> type[LossWeighting]:
        cls.options_model = options
        return WEIGHTINGS.register(name)(cls)

    return decorator


def weighting_options(name: str, values: Mapping[str, Any]) -> WeightingOptions:
    """Method `name`'s options model filled from `values`; ValueError naming what does not fit."""
    return validate_options(WEIGHTINGS.get(name).options_model, values, f"weighting '{name}'")


def build_weighting(name: str, options: Mapping[str, Any], tasks: Sequence[str]) -> LossWeighting:
    """The registered method `name` for `tasks`, with `options`."""
    return WEIGHTINGS.get(name)(tasks, weighting_options(name, options))
