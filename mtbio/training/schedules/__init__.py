"""Learning-rate schedules, one module each; importing this package registers them all in `SCHEDULES` (a new
schedule is one file that registers itself):

- `linear` (default; seed 004 section 4.2): linear warm-up, then linear decay to 0 (transformers'
  `get_linear_schedule_with_warmup`),
- `cosine`: linear warm-up, then half a cosine down to 0,
- `constant`: linear warm-up, then the peak learning rate.

A schedule is `factor(step, warmup, total) -> float`, the peak learning rate's multiplier at an optimizer step;
`build_scheduler` (`mtbio.training.optim`) wraps it in torch's `LambdaLR`, which the checkpoint saves and resumes.
"""
from __future__ import annotations

from typing import Callable

from mtbio.registry import Registry, import_modules

Schedule = Callable[[int, int, int], float]
SCHEDULES: Registry[Schedule] = Registry("schedule")


def register_schedule(name: str) -> Callable[[Schedule], Schedule]:
    """Register `factor(step, warmup, total) -> float` as `--schedule NAME`."""
    return SCHEDULES.register(name)


import_modules(__name__, __path__)

__all__ = ["SCHEDULES", "Schedule", "register_schedule"]
