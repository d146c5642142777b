"""`pooler`: the encoder's own pooler output, as `AutoModelForSequenceClassification` reads it (BERT: [CLS] → dense
→ tanh)."""
from __future__ import annotations

from typing import Any

from mtbio.model.poolings import register_pooling


@register_pooling("pooler", needs_pooler=True)
def pooler(hidden: Any, mask: Any, pooled: Any) -> Any:
    return pooled
