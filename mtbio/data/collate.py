"""Rows of a featurized dataset → one padded batch of tensors (dynamic padding to the batch max)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mtbio.data.featurize import SEGMENT_LENGTHS, WINDOW

# padding value per per-token column; `input_ids` uses the tokenizer's pad id
_PAD = {"attention_mask": 0, "token_type_ids": 0, "word_index": -1}
_TOKEN_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "word_index")


def pad_multiple_for(device: torch.device | str, mixed_precision: str | None = None) -> int | None:
    """Round batch widths up to a multiple of 8 on a GPU (tensor-core friendly shapes) and for bf16 on a CPU
    (fewer shapes for oneDNN's primitive cache, `mtbio.training.host_memory`); for fp32 on a CPU the rounding
    only adds padded work (~8% at NER lengths)."""
    return 8 if torch.device(device).type == "cuda" or mixed_precision == "bf16" else None


def collate(rows: list[dict[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = None,
            padded: Mapping[str, int] | None = None) -> dict[str, torch.Tensor]:
    """Pad per-token columns to the longest row (rounded up to `pad_to_multiple_of`) and stack the rest.

    `input_ids` → pad_token_id, `attention_mask`/`token_type_ids` → 0, `word_index` → -1, and the columns the
    task's kind declares per token (`padded`: column → padding value, tagging's `labels` → -100); all long.
    Other labels: integers → long, floats → float32, equal-length lists (multi-label, spans) → a matrix.
    Other scalar columns (`length`, `n_words`, `truncated`) are stacked as they come. Rows of segments (a
    `segment_lengths` column, `mtbio.data.featurize`) have each segment laid out in a slot as wide as the batch's
    longest segment (rounded up), a row's slots end to end, and that width as the batch's `window`.
    """
    padded = padded or {}
    first = rows[0]
    segments = SEGMENT_LENGTHS in first
    if segments:
        slot, width, places = _slots(rows, pad_to_multiple_of)
    else:
        lengths, width = _widths(rows, "input_ids", pad_to_multiple_of)
    batch: dict[str, torch.Tensor] = {}
    for key in first:
        if key == SEGMENT_LENGTHS:
            continue
        if key in _TOKEN_COLUMNS or key in padded:
            pad = pad_token_id if key == "input_ids" else padded[key] if key in padded else _PAD[key]
            values = [row[key] for row in rows]
            batch[key] = torch.from_numpy(_lay(values, places, width, pad) if segments else
                                          _pad(values, lengths, width, pad))
        else:
            values = np.asarray([row[key] for row in rows])
            if values.dtype.kind == "f":
                values = values.astype(np.float32, copy=False)
            elif values.dtype.kind in "iu":
                values = values.astype(np.int64, copy=False)
            batch[key] = torch.from_numpy(values)
    if segments:
        batch[WINDOW] = torch.full((len(rows),), slot, dtype=torch.int64)
    return batch


def _slots(rows: list[dict[str, Any]], pad_to_multiple_of: int | None) -> tuple[int, int, np.ndarray]:
    """Rows of segments: the slot width (the longest segment, rounded up), the row width (slots × the most segments
    a row holds) and, per token of the rows end to end, its position in its padded row."""
    segment_lengths = [row[SEGMENT_LENGTHS] for row in rows]
    slot = max(max(mine) for mine in segment_lengths)
    if pad_to_multiple_of:
        slot = -(-slot // pad_to_multiple_of) * pad_to_multiple_of
    width = slot * max(len(mine) for mine in segment_lengths)
    places = [r * width + k * slot + np.arange(n) for r, mine in enumerate(segment_lengths) for k, n in enumerate(mine)]
    return slot, width, np.concatenate(places)


def _lay(values: list[Any], places: np.ndarray, width: int, pad: int) -> np.ndarray:
    out = np.full(len(values) * width, pad, dtype=np.int64)
    out[places] = np.concatenate([np.asarray(v, dtype=np.int64) for v in values])
    return out.reshape(len(values), width)


def _widths(rows: list[dict[str, Any]], key: str, pad_to_multiple_of: int | None) -> tuple[np.ndarray, int]:
    """Each row's length in column `key`, and the batch's width (the longest, rounded up)."""
    lengths = np.fromiter((len(row[key]) for row in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max())
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    return lengths, width


def _pad(values: list[Any], lengths: np.ndarray, width: int, pad: int) -> np.ndarray:
    out = np.full((len(values), width), pad, dtype=np.int64)
    flat = np.concatenate([np.asarray(v, dtype=np.int64) for v in values])
    # scatter all rows at once: row r fills columns 0..lengths[r]-1
    mask = np.arange(width) < lengths[:, None]
    out[mask] = flat
    return out


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Move a collated batch to `device`. On a GPU the copy goes from pinned memory without
    waiting: a plain copy from pageable memory waits for every kernel already queued, so the host
    could not prepare the next batch while the GPU works on this one."""
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
