"""Rows that hold a long text's windows end to end (a task's `sliding_window`, `mtbio.data.featurize`): each window
is encoded on its own, and a sentence-level head pools each window and combines the windows' vectors. Rows of an
example's segments (`segment_columns`: a question paired with each candidate answer) take the same layout; a head
reads them with `pool_segments`, one vector per segment."""
from __future__ import annotations

from typing import Any

import torch

WINDOW = "window"  # the batch column that gives the tokens of one window


def _split(values: torch.Tensor, window: int) -> torch.Tensor:
    """[rows, width, ...] → [rows, windows, window, ...], the last window zero-padded."""
    rows, width = values.shape[:2]
    windows = -(-width // window)
    padding = values.new_zeros((rows, windows * window - width) + tuple(values.shape[2:]))
    return torch.cat([values, padding], 1).reshape(rows, windows, window, *values.shape[2:])


def encode_windows(encoder: Any, inputs: dict[str, torch.Tensor], window: int) -> Any:
    """The encoder's last hidden states of rows of windows, each window encoded as a text of its own (windows that
    are all padding are not encoded; their states are zero); the same width as the rows."""
    from transformers.modeling_outputs import BaseModelOutput

    rows, width = inputs["input_ids"].shape
    split = {name: _split(values, window).flatten(0, 1) for name, values in inputs.items()}
    real = split["attention_mask"].bool().any(-1)
    hidden = encoder(**{name: values[real] for name, values in split.items()}).last_hidden_state
    states = hidden.new_zeros(split["input_ids"].shape + (hidden.shape[-1],))
    states[real] = hidden
    return BaseModelOutput(last_hidden_state=states.reshape(rows, -1, hidden.shape[-1])[:, :width])


def window_owners(mask: torch.Tensor, window: int) -> list[int]:
    """The row of each window `encode_windows` encodes (those not all padding), in the order it encodes them."""
    real = _split(mask, window).bool().any(-1)  # [rows, windows]
    rows = torch.arange(real.shape[0]).repeat_interleave(real.shape[1])
    return rows[real.flatten().cpu()].tolist()


def pool_segments(hidden: torch.Tensor, mask: torch.Tensor, pooling: str, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each window (or segment: `mtbio.data.featurize.segment_columns`) of each row pooled, its [CLS] or the mean of
    its tokens, in float32: [rows, windows, hidden]; and which windows are real (not all padding): [rows, windows]."""
    mask = _split(mask.to(hidden.device), window).float()  # [rows, windows, window]
    states = _split(hidden.float(), window)  # [rows, windows, window, hidden]
    if pooling == "cls":
        pooled = states[:, :, 0]
    else:
        weights = mask.unsqueeze(-1)
        pooled = (states * weights).sum(2) / weights.sum(2).clamp(min=1.0)
    return pooled, mask.bool().any(-1)


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
