"""Running a (multi-task) model over a split and decoding its predictions into label space."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

import torch
from tqdm import tqdm

from mtbio.data.collate import pad_multiple_for, to_device
from mtbio.data.pipeline import SplitData
from mtbio.logs import bars_enabled
from mtbio.model.multitask import MultiTaskModel

PROGRESS_MIN_EXAMPLES = 1000  # smaller splits finish before a bar would tell anything


@torch.no_grad()
def predict_split(
    model: MultiTaskModel,
    task: str,
    data: SplitData,
    pad_token_id: int,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    autocast: Callable[[], ContextManager[Any]] | None = None,
    progress: bool = True,
    with_scores: bool = False,
    batches: list[list[int]] | None = None,
) -> list[Any]:
    """Predictions for every example of `data`, in the examples' order (only `batches`' examples when
    given, None elsewhere: a process's share of the split).

    `autocast` makes a fresh mixed-precision context per batch (e.g. `accelerator.autocast`).
    `progress`: a progress bar (examples) on splits of more than PROGRESS_MIN_EXAMPLES examples.
    `with_scores`: each item is (prediction, scores), scores from the head's `scores` (probabilities).
    """
    was_training = model.training
    model.eval()
    head = model.heads[task]
    predictions: list[Any] = [None] * len(data)
    multiple = pad_multiple_for(device)
    batches = list(data.eval_batches(batch_size)) if batches is None else batches
    total = sum(len(b) for b in batches)
    bar = tqdm(total=total, desc=f"predict {task}", unit="ex", leave=False, dynamic_ncols=True,
               disable=not progress or not bars_enabled() or total <= PROGRESS_MIN_EXAMPLES)
    try:
        for indices in batches:
            batch = to_device(data.batch(indices, pad_token_id, multiple), torch.device(device))
            batch.pop("labels", None)
            with autocast() if autocast else contextlib.nullcontext():
                logits = model(task, **batch).logits
            decoded = head.decode(logits, batch)
            if with_scores:
                decoded = list(zip(decoded, head.scores(logits, batch)))
            for index, prediction in zip(indices, decoded):
                predictions[index] = prediction
            bar.update(len(indices))
    finally:
        bar.close()
        model.train(was_training)
    return predictions
