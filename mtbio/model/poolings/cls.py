"""`cls`: the hidden state of the first token ([CLS]), as MT-BERT's heads read it."""
from __future__ import annotations

from typing import Any

from mtbio.model.poolings import register_pooling


@register_pooling("cls")
def cls(hidden: Any, mask: Any, pooled: Any) -> Any:
    return hidden[:, 0]
