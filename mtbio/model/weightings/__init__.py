"""The loss-weighting methods, one module each; importing this package registers them all in
`WEIGHTINGS` (every module here is imported, so a new method is one file that registers itself):

- `fixed` (default): each task's loss times its task definition's `loss_weight` (1 unless set);
- `uncertainty` (Kendall, Gal & Cipolla, 2018): a learned log-variance per task.

The registry and the base class are `mtbio.model.weighting`.
"""
from __future__ import annotations

import importlib
import pkgutil

from mtbio.model.weighting import WEIGHTINGS, LossWeighting, build_weighting, register_weighting, weighting_options

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["WEIGHTINGS", "LossWeighting", "build_weighting", "register_weighting", "weighting_options"]
