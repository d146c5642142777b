"""What a sentence-level head reads of the encoder's output, by name (a task's `pooling`, `--pooling`): one module
each (`cls`, `mean`, `pooler`); every module here is imported, so a new pooling is one file that registers itself.

A pooling is a function `fn(hidden, mask, pooled)` of the last hidden states [rows, tokens, width], the attention
mask [rows, tokens] and the encoder's pooler output (None for an encoder without one), returning [rows, width];
`needs_pooler` and `needs_mask` mark one that reads those. Its module imports torch inside the function only, so
the names (the flag's choices, the task definitions' check) are read without torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mtbio.registry import Registry, import_modules
from mtbio.tasks.loading import register_name_check

PoolFn = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Pooling:
    """A registered pooling: its function and what it reads besides the hidden states."""

    name: str
    fn: PoolFn
    needs_pooler: bool = False
    needs_mask: bool = False


POOLINGS: Registry[Pooling] = Registry("pooling")


def register_pooling(name: str, *, needs_pooler: bool = False, needs_mask: bool = False) -> Callable[[PoolFn], PoolFn]:
    """Register `fn(hidden, mask, pooled) -> [rows, width]` as pooling `name`."""

    def decorator(fn: PoolFn) -> PoolFn:
        POOLINGS.register(name)(Pooling(name, fn, needs_pooler, needs_mask))
        return fn

    return decorator


@register_name_check
def _registered_pooling(task: Any) -> list[tuple[str, str]]:
    if task.pooling in POOLINGS:
        return []
    return [("pooling", f"unknown pooling '{task.pooling}' (registered: {', '.join(POOLINGS.names())})")]


import_modules(__name__, __path__)
