"""`mean`: the mean of the hidden states of the tokens the mask keeps (sentence-transformers' mean pooling, how
the packaged MiniLM was trained to embed a text); sums in float32, returns the hidden states' dtype."""
from __future__ import annotations

from typing import Any

from mtbio.model.poolings import register_pooling


@register_pooling("mean", needs_mask=True)
def mean(hidden: Any, mask: Any, pooled: Any) -> Any:
    import torch

    weights = mask.to(hidden.device, torch.float32).unsqueeze(-1)
    return ((hidden.float() * weights).sum(1) / weights.sum(1).clamp(min=1.0)).to(hidden.dtype)
