"""Batches of segments (`mtbio.data.featurize`: a long text's windows, a question paired with each candidate answer,
a bi-encoder's two texts), each laid out in a slot `window` tokens wide: each segment is encoded as a text of its
own, a head reads one vector per segment with `pool_segments`, and a sentence-level head combines a text's windows'."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

import torch

from mtbio.data.featurize import WINDOW
from mtbio.model.poolings import POOLINGS

__all__ = ["WINDOW", "encode_windows", "pool_segments", "pool_windows"]


def _split(values: torch.Tensor, window: int) -> torch.Tensor:
    """[rows, width, ...] → [rows, windows, window, ...], the last window zero-padded."""
    rows, width = values.shape[:2]
    windows = -(-width // window)
    padding = values.new_zeros((rows, windows * window - width) + tuple(values.shape[2:]))
    return torch.cat([values, padding], 1).reshape(rows, windows, window, *values.shape[2:])


def encode_windows(encoder: Any, inputs: dict[str, torch.Tensor], window: int,
                   around: Callable[[list[int]], ContextManager[Any]] | None = None) -> Any:
    """The encoder's last hidden states of rows of segments, each segment encoded as a text of its own, all of them
    in one pass (segments that are all padding are not encoded; their states are zero); the same width as the rows.
    `around(owners)`: a context for that pass, given the row of each segment it encodes (a LoRA adapter per row)."""
    from transformers.modeling_outputs import BaseModelOutput

    rows, width = inputs["input_ids"].shape
    split = {name: _split(values, window).flatten(0, 1) for name, values in inputs.items()}  # [rows·segments, window]
    real = split["attention_mask"].bool().any(-1)
    owners = torch.arange(rows, device=real.device).repeat_interleave(len(real) // rows)[real].tolist()
    with around(owners) if around is not None else contextlib.nullcontext():
        hidden = encoder(**{name: values[real] for name, values in split.items()}).last_hidden_state
    states = hidden.new_zeros(split["input_ids"].shape + (hidden.shape[-1],))
    states[real] = hidden
    return BaseModelOutput(last_hidden_state=states.reshape(rows, -1, hidden.shape[-1])[:, :width])


def pool_segments(hidden: torch.Tensor, mask: torch.Tensor, pooling: str, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each segment (a window, a candidate, a pair's text) of each row pooled by a registered pooling that reads no
    pooler output (cls, mean, ...), in float32: [rows, segments, hidden]; and which segments are real (not all
    padding): [rows, segments]."""
    mask = _split(mask.to(hidden.device), window)  # [rows, segments, window]
    states = _split(hidden.float(), window)  # [rows, segments, window, hidden]
    rows, segments = mask.shape[:2]
    pooled = POOLINGS.get(pooling).fn(states.flatten(0, 1), mask.flatten(0, 1), None)
    return pooled.reshape(rows, segments, -1), mask.bool().any(-1)


def pool_windows(hidden: torch.Tensor, mask: torch.Tensor, pooling: str, window: int, aggregate: str) -> torch.Tensor:
    """One vector per row of windows: each window pooled (`pool_segments`), then the windows' vectors combined by
    their mean or their elementwise max. Sums in float32; returns `hidden`'s dtype."""
    pooled, real = pool_segments(hidden, mask, pooling, window)
    if aggregate == "max":
        combined = pooled.masked_fill(~real.unsqueeze(-1), float("-inf")).max(1).values
    else:
        weights = real.unsqueeze(-1).float()
        combined = (pooled * weights).sum(1) / weights.sum(1).clamp(min=1.0)
    return combined.to(hidden.dtype)
