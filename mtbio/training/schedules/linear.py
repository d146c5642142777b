"""Linear warm-up over the first `warmup` steps, then linear decay to 0 at `total`."""
from __future__ import annotations

from mtbio.training.schedules import register_schedule


@register_schedule("linear")
def linear(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))
