"""The loss-weighting methods, one module each; importing this package registers them all in
`WEIGHTINGS` (every module here is imported, so a new method is one file that registers itself):

- `fixed` (default): each task's loss times its task definition's `loss_weight` (1 unless set);
- `uncertainty` (Kendall, Gal & Cipolla, 2018): a learned log-variance per task.

The registry and the base class are `mtbio.model.weighting`.
"""
from __future__ import annotations

from mtbio.model.weighting import WEIGHTINGS, LossWeighting, build_weighting, register_weighting, weighting_options
from mtbio.registry import import_modules

import_modules(__name__, __path__)

__all__ = ["WEIGHTINGS", "LossWeighting", "build_weighting", "register_weighting", "weighting_options"]
