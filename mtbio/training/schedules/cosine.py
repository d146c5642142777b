"""Linear warm-up, then half a cosine from the peak down to 0 at `total` (transformers' `get_cosine_schedule_with_warmup`
with its default half cycle)."""
from __future__ import annotations

import math

from mtbio.training.schedules import register_schedule


@register_schedule("cosine")
def cosine(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
