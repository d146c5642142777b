"""Linear warm-up, then the peak learning rate to the end."""
from __future__ import annotations

from mtbio.training.schedules import register_schedule


@register_schedule("constant")
def constant(step: int, warmup: int, total: int) -> float:
    return step / max(1, warmup) if step < warmup else 1.0
